"""Reproducer: "torch.jit.frontend.UnsupportedNodeError: Set is not supported in TorchScript"
(deadends.dev pytorch/torchscript-not-supported/torch2-linux).

A module whose forward calls a helper that counts distinct values with a Python set
literal, compiled with torch.jit.script. Every variant that produces a model must give
the eager module's outputs on two inputs with different numbers of distinct values.

No `from __future__ import annotations` here: TorchScript reads the annotations of the
scripted methods and ignored helpers at run time.
"""

# typing.List, not list[...]: torch 1.10 cannot read list[float] in @torch.jit.ignore signatures
# ruff: noqa: UP006, UP035

import io
import warnings
from typing import List

import torch
from reprokit import Unsupported
from torch import nn


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


def inputs(device) -> list:
    """Two inputs with different numbers of distinct values (where torch.jit.script exists)."""
    if not hasattr(torch.jit, "script"):
        raise Unsupported("torch.jit.script does not exist in torch %s" % torch.__version__)
    return [
        torch.tensor([1.0, 1.0, 2.0], device=device),  # 2 distinct values
        torch.tensor([1.0, 2.0, 3.0, 4.0], device=device),  # 4 distinct values
    ]


def scripted(device, cls, eager=SetLiteral, save=False) -> dict:
    """torch.jit.script(cls()) against the eager module (and after torch.jit.save/load)."""
    examples = inputs(device)
    model = torch.jit.script(cls())
    checks = {
        "scripted": is_script(model),
        "same_as_eager": agrees(model, eager(), examples, "scripted"),
    }
    if save:
        buffer = io.BytesIO()
        torch.jit.save(model, buffer)
        buffer.seek(0)
        loaded = torch.jit.load(buffer)
        checks["same_after_save_load"] = agrees(loaded, eager(), examples, "saved and loaded")
    return checks


def compiled(device, **options) -> dict:
    examples = inputs(device)
    require_compile(**options)
    model = torch.compile(SetLiteral(), **options)
    return {"same_as_eager": agrees(model, SetLiteral(), examples, "torch.compile(%s)" % options)}


def baseline_set_literal(device, precision):
    return scripted(device, SetLiteral)


def baseline_set_comprehension(device, precision):
    return scripted(device, SetComprehension)


def workaround1_refactor_to_list(device, precision):
    return scripted(device, ListBased)


def workaround2_jit_ignore(device, precision):
    return scripted(device, Ignored)


def workaround2_jit_ignore_then_save(device, precision):
    return scripted(device, Ignored, save=True)


def workaround2_jit_unused(device, precision):
    return scripted(device, Unused)


def workaround3_torch_compile(device, precision):
    return compiled(device)


def workaround3_torch_compile_eager_backend(device, precision):
    return compiled(device, backend="eager")


def deadend1_jit_trace(device, precision):
    examples = inputs(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = torch.jit.trace(SetLiteral(), examples[0])
    print(
        "trace warnings:",
        sorted({"%s: %s" % (w.category.__name__, str(w.message)[:80]) for w in caught}),
    )
    return {"same_as_eager": agrees(model, SetLiteral(), examples, "traced")}


def deadend2_try_except_around_script(device, precision):
    examples = inputs(device)
    try:
        model = torch.jit.script(SetLiteral())
    except Exception as exc:
        print("caught %s: %s" % (type(exc).__name__, str(exc).splitlines()[0]))
        model = SetLiteral()
    return {
        "scripted": is_script(model),
        "same_as_eager": agrees(model, SetLiteral(), examples, "model in use"),
    }


def deadend2_try_except_in_code(device, precision):
    return scripted(device, TryInCode)


def control_no_set(device, precision):
    return scripted(device, Double, eager=Double)


VARIANTS = {
    "baseline-set-literal": baseline_set_literal,
    "baseline-set-comprehension": baseline_set_comprehension,
    "workaround1-refactor-to-list": workaround1_refactor_to_list,
    "workaround2-jit-ignore": workaround2_jit_ignore,
    "workaround2-jit-ignore-then-save": workaround2_jit_ignore_then_save,
    "workaround2-jit-unused": workaround2_jit_unused,
    "workaround3-torch-compile": workaround3_torch_compile,
    "workaround3-torch-compile-eager-backend": workaround3_torch_compile_eager_backend,
    "deadend1-jit-trace": deadend1_jit_trace,
    "deadend2-try-except-around-script": deadend2_try_except_around_script,
    "deadend2-try-except-in-code": deadend2_try_except_in_code,
    "control-no-set": control_no_set,
}
