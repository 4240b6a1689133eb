"""Reproducer: "RuntimeError: TorchScript failed to compile model"
(deadends.dev pytorch/torchscript-error/pt2-linux).

torch.jit.script of small modules using the Python features the entry names: an
unannotated int argument (TorchScript assumes Tensor), **kwargs, a generator expression.
Every variant that produces a model must give the eager module's outputs for two values
of the int argument.

No `from __future__ import annotations` here: TorchScript reads the annotations of the
scripted methods at run time.

    python repro.py --list
    python repro.py --variant baseline-unannotated-int --device cpu --precision fp32
"""

# typing.List, not list[...]: torch 1.10 cannot read list[float] in @torch.jit.ignore signatures
# ruff: noqa: UP006, UP035

import sys
from pathlib import Path
from typing import List

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-unannotated-int": "forward(self, x, n) loops range(n) with n unannotated",
    "baseline-kwargs": "forward(self, x, **kwargs)",
    "baseline-generator": "forward sums a generator expression",
    "workaround1-annotate-types": "forward(self, x: Tensor, n: int) -> Tensor",
    "workaround2-no-kwargs": "the **kwargs forward rewritten with an explicit argument",
    "workaround2-no-generator": "the generator expression rewritten as a loop",
    "deadend1-trace-literal": "torch.jit.trace(model, (x, n)) in place of torch.jit.script",
    "deadend1-trace-fixed-n": "torch.jit.trace of the model with n bound to 2, used for other n",
    "control-annotated-tensor-only": "a module whose forward takes and returns Tensors only, scripted",
}
NOT_WRITTEN: List[str] = []


class Unannotated(nn.Module):
    def forward(self, x, n):
        for _ in range(n):
            x = x * 2
        return x


class Annotated(nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            x = x * 2
        return x


class Kwargs(nn.Module):
    def forward(self, x: torch.Tensor, **kwargs) -> torch.Tensor:
        return x * kwargs.get("scale", 1.0)


class ExplicitScale(nn.Module):
    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return x * scale


class Generator(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum(x[i] * i for i in range(x.shape[0]))


class Loop(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = torch.zeros_like(x[0])
        for i in range(x.shape[0]):
            total = total + x[i] * i
        return total


class FixedN(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Annotated()(x, 2)


class Plain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def compare(got, want, what: str) -> dict:
    same = [bool(torch.equal(g, w)) for g, w in zip(got, want)]  # noqa: B905 (Python 3.7)
    return {
        "ok": bool(same) and all(same),
        "detail": "%s: %s, eager %s"
        % (what, [g.tolist() for g in got], [w.tolist() for w in want]),
    }


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if not hasattr(torch.jit, "script"):
        raise Unsupported("torch.jit.script does not exist in torch %s" % torch.__version__)
    x = torch.tensor([1.0, 2.0, 3.0], device=device)
    ns = (2, 3)
    eager_n = [Annotated()(x, n) for n in ns]

    if variant == "baseline-unannotated-int":
        model = torch.jit.script(Unannotated())
        return {"same_as_eager": compare([model(x, n) for n in ns], eager_n, "scripted")}
    if variant == "workaround1-annotate-types":
        model = torch.jit.script(Annotated())
        return {"same_as_eager": compare([model(x, n) for n in ns], eager_n, "scripted")}
    if variant in ("baseline-kwargs", "workaround2-no-kwargs"):
        model = torch.jit.script(Kwargs() if variant == "baseline-kwargs" else ExplicitScale())
        return {"same_as_eager": compare([model(x, scale=3.0)], [x * 3.0], "scripted")}
    if variant in ("baseline-generator", "workaround2-no-generator"):
        model = torch.jit.script(Generator() if variant == "baseline-generator" else Loop())
        m = torch.arange(6.0, device=device).reshape(3, 2)
        return {"same_as_eager": compare([model(m)], [Loop()(m)], "scripted")}
    if variant == "deadend1-trace-literal":
        model = torch.jit.trace(Annotated(), (x, 2))
        return {"same_as_eager": compare([model(x, n) for n in ns], eager_n, "traced")}
    if variant == "deadend1-trace-fixed-n":
        model = torch.jit.trace(FixedN(), (x,))
        return {
            "same_as_eager": compare(
                [model(x) for _ in ns], eager_n, "traced with n=2, asked for n=%s" % (ns,)
            )
        }
    model = torch.jit.script(Plain())
    return {"same_as_eager": compare([model(x)], [x * 2], "scripted")}


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
