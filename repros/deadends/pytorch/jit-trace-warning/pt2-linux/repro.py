"""Reproducer: "TracerWarning: Converting a tensor to a Python boolean"
(deadends.dev pytorch/jit-trace-warning/pt2-linux).

torch.jit.trace of a function that branches on a tensor's value (x * 2 when x.sum() > 0,
else x - 1), traced with a positive example. The documented signature is a warning: where
torch issues a TracerWarning while tracing, the run raises that very warning object (the
one torch created, recorded by warnings.catch_warnings), so the harness can classify it.
Every variant that produces a function must agree with the eager one on a positive and a
negative input, so a trace that froze one branch is `wrong_result`.

    python repro.py --list
    python repro.py --variant baseline-branch-on-tensor --device cpu --precision fp32
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-branch-on-tensor": "torch.jit.trace of a function with `if x.sum() > 0:`; torch's TracerWarning is raised",
    "workaround1-jit-script": "torch.jit.script of the same function",
    "workaround2-branchless": "the branch rewritten as torch.where(x.sum() > 0, x * 2, x - 1), traced",
    "deadend1-ignore-tracer-warnings": "the baseline's trace with TracerWarning filtered out",
    "deadend2-remove-control-flow": "the branch removed (always x * 2), traced",
    "control-no-branch": "torch.jit.trace of a function without data-dependent control flow",
}
NOT_WRITTEN: list[str] = []


def branchy(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x * 2
    return x - 1


def branchless(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.sum() > 0, x * 2, x - 1)


def one_branch(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    tracer_warning = getattr(torch.jit, "TracerWarning", None)
    if tracer_warning is None:
        raise Unsupported("torch.jit.TracerWarning does not exist in torch %s" % torch.__version__)
    positive = torch.tensor([1.0, 2.0], device=device)
    negative = torch.tensor([-1.0, -2.0], device=device)
    fn = {
        "workaround2-branchless": branchless,
        "deadend2-remove-control-flow": one_branch,
        "control-no-branch": one_branch,
    }.get(variant, branchy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if variant == "deadend1-ignore-tracer-warnings":
            warnings.filterwarnings("ignore", category=tracer_warning)
        if variant == "workaround1-jit-script":
            compiled = torch.jit.script(fn)
        else:
            compiled = torch.jit.trace(fn, positive)
    tracer = [w for w in caught if issubclass(w.category, tracer_warning)]
    if tracer and variant != "deadend1-ignore-tracer-warnings":
        raise tracer[0].message  # the TracerWarning instance torch issued, unchanged
    reference = branchy if variant != "control-no-branch" else one_branch
    got = [compiled(t).tolist() for t in (positive, negative)]
    want = [reference(t).tolist() for t in (positive, negative)]
    return {
        "agrees_on_both_branches": {
            "ok": got == want,
            "detail": "outputs for a positive and a negative input %s, eager %s; TracerWarnings seen %d"
            % (got, want, len(tracer)),
        }
    }


if __name__ == "__main__":
    sys.exit(
        main(
            run,
            VARIANTS,
            __doc__,
            sys.argv[1:],
            not_written=NOT_WRITTEN,
            fixed_precision={v: "fp32" for v in VARIANTS},
        )
    )
