"""Reproducer: "torch.jit.frontend.UnsupportedNodeError: Set is not supported in TorchScript"
(deadends.dev pytorch/torchscript-not-supported/torch2-linux).

A module whose forward calls a helper that counts distinct values with a Python set
literal, compiled with torch.jit.script. Every variant that produces a model must give
the eager module's outputs on two inputs with different numbers of distinct values.

    python repro.py --list
    python repro.py --variant baseline-set-literal --device cpu --precision fp32

No `from __future__ import annotations` here: TorchScript reads the annotations of the
scripted methods and ignored helpers at run time.
"""

# typing.List, not list[...]: torch 1.10 cannot read list[float] in @torch.jit.ignore signatures
# ruff: noqa: UP006, UP035

import io
import sys
import warnings
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
    "baseline-set-literal": "torch.jit.script of a module whose helper builds a set literal {values[0]}",
    "baseline-set-comprehension": "the same helper written as a set comprehension {v for v in values}",
    "workaround1-refactor-to-list": "the helper rewritten with a List (membership test and append)",
    "workaround2-jit-ignore": "@torch.jit.ignore on the helper; the scripted module must run",
    "workaround2-jit-ignore-then-save": "@torch.jit.ignore on the helper; the scripted module must survive torch.jit.save/load",
    "workaround2-jit-unused": "@torch.jit.unused on the helper; the scripted module must run",
    "workaround3-torch-compile": "torch.compile(model) instead of torch.jit.script (default backend)",
    "workaround3-torch-compile-eager-backend": "torch.compile(model, backend='eager'): TorchDynamo's Python capture without a code generator",
    "deadend1-jit-trace": "torch.jit.trace(model, example) instead of torch.jit.script",
    "deadend2-try-except-around-script": "try: torch.jit.script(model) except: keep the eager model",
    "deadend2-try-except-in-code": "the set code wrapped in try/except inside the helper, then torch.jit.script",
    "control-no-set": "a module without the helper (x * 2), scripted",
}
NOT_WRITTEN: List[str] = []


class SetLiteral(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values: List[float] = x.tolist()
        return x * self.count(values)

    def count(self, values: List[float]) -> float:
        seen = {values[0]}
        for v in values:
            seen.add(v)
        return float(len(seen))


class SetComprehension(SetLiteral):
    def count(self, values: List[float]) -> float:
        seen = {v for v in values}
        return float(len(seen))


class ListBased(SetLiteral):
    def count(self, values: List[float]) -> float:
        seen: List[float] = []
        for v in values:
            if v not in seen:
                seen.append(v)
        return float(len(seen))


class Ignored(SetLiteral):
    @torch.jit.ignore
    def count(self, values: List[float]) -> float:
        seen = {values[0]}
        for v in values:
            seen.add(v)
        return float(len(seen))


class Unused(SetLiteral):
    @torch.jit.unused
    def count(self, values: List[float]) -> float:
        seen = {values[0]}
        for v in values:
            seen.add(v)
        return float(len(seen))


class TryInCode(SetLiteral):
    def count(self, values: List[float]) -> float:
        try:
            seen = {values[0]}
            for v in values:
                seen.add(v)
            return float(len(seen))
        except Exception:
            return float(len(values))


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


def require_compile(**kwargs) -> None:
    compile_fn = getattr(torch, "compile", None)
    if compile_fn is None:
        raise Unsupported("torch.compile does not exist in torch %s" % torch.__version__)
    try:
        compile_fn(lambda t: t + 1, **kwargs)(torch.zeros(2))
    except Exception as exc:
        raise Unsupported(
            "torch.compile cannot compile a one-line function here: %s: %s"
            % (type(exc).__name__, str(exc)[:300])
        )


def agrees(model, eager: nn.Module, inputs, what: str) -> dict:
    got = [model(x) for x in inputs]
    want = [eager(x) for x in inputs]
    same = [bool(torch.equal(g, w)) for g, w in zip(got, want)]  # noqa: B905 (Python 3.7)
    return {
        "ok": all(same),
        "detail": "%s: outputs %s, eager %s"
        % (what, [g.tolist() for g in got], [w.tolist() for w in want]),
    }


def is_script(model) -> dict:
    scripted = isinstance(model, torch.jit.ScriptModule)
    return {"ok": scripted, "detail": "the model in use is a %s" % type(model).__name__}


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if not hasattr(torch.jit, "script"):
        raise Unsupported("torch.jit.script does not exist in torch %s" % torch.__version__)
    inputs = [
        torch.tensor([1.0, 1.0, 2.0], device=device),  # 2 distinct values
        torch.tensor([1.0, 2.0, 3.0, 4.0], device=device),  # 4 distinct values
    ]
    eager = SetLiteral()
    cls = {
        "baseline-set-literal": SetLiteral,
        "baseline-set-comprehension": SetComprehension,
        "workaround1-refactor-to-list": ListBased,
        "workaround2-jit-ignore": Ignored,
        "workaround2-jit-ignore-then-save": Ignored,
        "workaround2-jit-unused": Unused,
        "deadend2-try-except-in-code": TryInCode,
        "control-no-set": Double,
    }.get(variant, SetLiteral)
    if variant == "control-no-set":
        eager = Double()
    if variant.startswith("workaround3-torch-compile"):
        kwargs = {"backend": "eager"} if variant.endswith("eager-backend") else {}
        require_compile(**kwargs)
        model = torch.compile(SetLiteral(), **kwargs)
        return {"same_as_eager": agrees(model, eager, inputs, "torch.compile(%s)" % kwargs)}
    if variant == "deadend1-jit-trace":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = torch.jit.trace(SetLiteral(), inputs[0])
        print(
            "trace warnings:",
            sorted({"%s: %s" % (w.category.__name__, str(w.message)[:80]) for w in caught}),
        )
        return {"same_as_eager": agrees(model, eager, inputs, "traced")}
    if variant == "deadend2-try-except-around-script":
        try:
            model = torch.jit.script(SetLiteral())
        except Exception as exc:
            print("caught %s: %s" % (type(exc).__name__, str(exc).splitlines()[0]))
            model = SetLiteral()
        return {
            "scripted": is_script(model),
            "same_as_eager": agrees(model, eager, inputs, "model in use"),
        }

    model = torch.jit.script(cls())
    checks = {
        "scripted": is_script(model),
        "same_as_eager": agrees(model, eager, inputs, "scripted"),
    }
    if variant == "workaround2-jit-ignore-then-save":
        buffer = io.BytesIO()
        torch.jit.save(model, buffer)
        buffer.seek(0)
        loaded = torch.jit.load(buffer)
        checks["same_after_save_load"] = agrees(loaded, eager, inputs, "saved and loaded")
    return checks


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
