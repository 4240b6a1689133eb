"""Reproducer: "torch.compile failed for model" (deadends/pytorch/compile-error/pt2-linux).

torch.compile of a small model whose forward branches on a tensor's value (a Python `if` on
data, which the graph capture cannot trace through), then a forward and backward through the
compiled model. Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/compile-error/pt2-linux). Inductor compiles C++ on CPU: the
first run of a cell takes tens of seconds. fp32 only.

    python repro.py --list
    python repro.py --variant baseline-data-dependent-branch --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-data-dependent-branch": "torch.compile(model) with the default mode; forward branches on x.sum() > 0",
    "workaround1-reduce-overhead": "torch.compile(model, mode='reduce-overhead')",
    "workaround2-compiler-disable": "the branching part wrapped in torch.compiler.disable",
    "deadend1-no-compile": "the model run eagerly, uncompiled",
    "deadend2-fullgraph": "torch.compile(model, fullgraph=True)",
    "control-straight-line-model": "torch.compile of a model with no data-dependent branch",
}
NOT_WRITTEN = []


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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("compilation is measured in fp32 only")
    if not hasattr(torch, "compile"):
        raise Unsupported("torch.compile does not exist in torch %s" % torch.__version__)
    mode = {"control-straight-line-model": "plain", "workaround2-compiler-disable": "disabled"}.get(
        variant, "branch"
    )
    torch.manual_seed(0)
    model = Net(mode).to(device)
    if mode == "disabled":
        compiler = getattr(torch, "compiler", None)
        if compiler is None or not hasattr(compiler, "disable"):
            raise Unsupported(
                "torch.compiler.disable does not exist in torch %s" % torch.__version__
            )
        model.disabled_branch = compiler.disable(branch)
    x = torch.randn(4, 8, device=device)
    eager = model(x).detach()
    kwargs = {}
    if variant == "workaround1-reduce-overhead":
        kwargs["mode"] = "reduce-overhead"
    elif variant == "deadend2-fullgraph":
        kwargs["fullgraph"] = True
    compiled = model if variant == "deadend1-no-compile" else torch.compile(model, **kwargs)
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


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
