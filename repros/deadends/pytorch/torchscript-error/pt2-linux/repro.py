"""Reproducer: "RuntimeError: TorchScript failed to compile model"
(deadends.dev pytorch/torchscript-error/pt2-linux).

torch.jit.script of small modules using the Python features the entry names: an
unannotated int argument (TorchScript assumes Tensor), **kwargs, a generator expression.
Every variant that produces a model must give the eager module's outputs for two values
of the int argument.

No `from __future__ import annotations` here: TorchScript reads the annotations of the
scripted methods at run time.
"""

import torch
from reprokit import Unsupported
from torch import nn


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


def inputs(device):
    """Preconditions; the input, the two values of n, and the eager module's outputs."""
    if not hasattr(torch.jit, "script"):
        raise Unsupported("torch.jit.script does not exist in torch %s" % torch.__version__)
    x = torch.tensor([1.0, 2.0, 3.0], device=device)
    ns = (2, 3)
    return x, ns, [Annotated()(x, n) for n in ns]


def int_argument(device, module) -> dict:
    x, ns, eager_n = inputs(device)
    model = torch.jit.script(module)
    return {"same_as_eager": compare([model(x, n) for n in ns], eager_n, "scripted")}


def keyword_scale(device, module) -> dict:
    x, _, _ = inputs(device)
    model = torch.jit.script(module)
    return {"same_as_eager": compare([model(x, scale=3.0)], [x * 3.0], "scripted")}


def weighted_sum(device, module) -> dict:
    inputs(device)
    model = torch.jit.script(module)
    m = torch.arange(6.0, device=device).reshape(3, 2)
    return {"same_as_eager": compare([model(m)], [Loop()(m)], "scripted")}


def baseline_unannotated_int(device, precision):
    return int_argument(device, Unannotated())


def baseline_kwargs(device, precision):
    return keyword_scale(device, Kwargs())


def baseline_generator(device, precision):
    return weighted_sum(device, Generator())


def workaround1_annotate_types(device, precision):
    return int_argument(device, Annotated())


def workaround2_no_kwargs(device, precision):
    return keyword_scale(device, ExplicitScale())


def workaround2_no_generator(device, precision):
    return weighted_sum(device, Loop())


def deadend1_trace_literal(device, precision):
    x, ns, eager_n = inputs(device)
    model = torch.jit.trace(Annotated(), (x, 2))
    return {"same_as_eager": compare([model(x, n) for n in ns], eager_n, "traced")}


def deadend1_trace_fixed_n(device, precision):
    x, ns, eager_n = inputs(device)
    model = torch.jit.trace(FixedN(), (x,))
    return {
        "same_as_eager": compare(
            [model(x) for _ in ns], eager_n, "traced with n=2, asked for n=%s" % (ns,)
        )
    }


def control_annotated_tensor_only(device, precision):
    x, _, _ = inputs(device)
    model = torch.jit.script(Plain())
    return {"same_as_eager": compare([model(x)], [x * 2], "scripted")}


VARIANTS = {
    "baseline-unannotated-int": baseline_unannotated_int,
    "baseline-kwargs": baseline_kwargs,
    "baseline-generator": baseline_generator,
    "workaround1-annotate-types": workaround1_annotate_types,
    "workaround2-no-kwargs": workaround2_no_kwargs,
    "workaround2-no-generator": workaround2_no_generator,
    "deadend1-trace-literal": deadend1_trace_literal,
    "deadend1-trace-fixed-n": deadend1_trace_fixed_n,
    "control-annotated-tensor-only": control_annotated_tensor_only,
}
