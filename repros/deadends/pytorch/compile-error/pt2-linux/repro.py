"""Reproducer: "torch.compile failed for model" (deadends/pytorch/compile-error/pt2-linux).

torch.compile of a small model whose forward branches on a tensor's value (a Python `if` on
data, which the graph capture cannot trace through), then a forward and backward through the
compiled model. Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/compile-error/pt2-linux). Inductor compiles C++ on CPU: the
first run of a cell takes tens of seconds.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn


def branch(h):
    if h.sum() > 0:  # a Python decision on data: a graph break for the compiler
        return h * 2
    return h - 1


class Net(nn.Module):
    def __init__(self, mode="branch"):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 1)
        self.mode = mode
        self.disabled_branch = None

    def forward(self, x):
        h = torch.relu(self.a(x))
        if self.mode == "branch":
            h = branch(h)
        elif self.mode == "disabled":
            h = self.disabled_branch(h)
        return self.b(h)


def compile_and_step(device, net="branch", compile=True, **options) -> dict:
    """A forward and backward through torch.compile(model, **options) (the eager model where
    not ``compile``), against the eager forward; ``net``: the Net's mode."""
    if not hasattr(torch, "compile"):
        raise Unsupported("torch.compile does not exist in torch %s" % torch.__version__)
    torch.manual_seed(0)
    model = Net(net).to(device)
    if net == "disabled":
        compiler = getattr(torch, "compiler", None)
        if compiler is None or not hasattr(compiler, "disable"):
            raise Unsupported(
                "torch.compiler.disable does not exist in torch %s" % torch.__version__
            )
        model.disabled_branch = compiler.disable(branch)
    x = torch.randn(4, 8, device=device)
    eager = model(x).detach()
    compiled = torch.compile(model, **options) if compile else model
    out = compiled(x)
    out.sum().backward()
    err = (out.detach() - eager).abs().max().item()
    return {
        "matches_eager": {"ok": err <= 1e-4, "detail": "max |compiled - eager| = %.3g" % err},
        "gradients": {
            "ok": model.a.weight.grad is not None
            and bool(torch.isfinite(model.a.weight.grad).all()),
            "detail": "a.weight.grad %s"
            % ("missing" if model.a.weight.grad is None else "present"),
        },
    }


def baseline_data_dependent_branch(device, precision):
    return compile_and_step(device)


def workaround1_reduce_overhead(device, precision):
    return compile_and_step(device, mode="reduce-overhead")


def workaround2_compiler_disable(device, precision):
    return compile_and_step(device, net="disabled")


def deadend1_no_compile(device, precision):
    return compile_and_step(device, compile=False)


def deadend2_fullgraph(device, precision):
    return compile_and_step(device, fullgraph=True)


def control_straight_line_model(device, precision):
    return compile_and_step(device, net="plain")


VARIANTS = {
    "baseline-data-dependent-branch": baseline_data_dependent_branch,
    "workaround1-reduce-overhead": workaround1_reduce_overhead,
    "workaround2-compiler-disable": workaround2_compiler_disable,
    "deadend1-no-compile": deadend1_no_compile,
    "deadend2-fullgraph": deadend2_fullgraph,
    "control-straight-line-model": control_straight_line_model,
}
