"""Reproducer: "element 0 of tensors does not require grad and does not have a grad_fn"
(deadends/pytorch/autograd-no-grad-fn/torch2-linux).

A small regression trained with SGD for a few steps. Each baseline loses the graph in one of
the ways the knowledge-base entry names (frozen parameters, a forward through detached values,
the loop under torch.no_grad()); each workaround and dead end variant applies one of the
entry's (https://deadends.dev/pytorch/autograd-no-grad-fn/torch2-linux) to the baseline it
addresses.

    python repro.py --list
    python repro.py --variant baseline-frozen-params --device cpu --precision fp32
"""

from __future__ import annotations

import contextlib
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
    "baseline-frozen-params": "every parameter has requires_grad=False (e.g. a frozen backbone left frozen)",
    "baseline-detached-forward": "the forward pass goes through .detach() (e.g. a numpy round trip)",
    "baseline-no-grad-loop": "the training step runs inside torch.no_grad()",
    "workaround1-requires-grad-true": "frozen model: requires_grad=True set on its parameters",
    "workaround2-literal-check-graph": "detached forward: loss.grad_fn checked before backward, the step skipped when missing",
    "workaround2-forward-builds-graph": "detached forward: the forward rewritten without .detach()",
    "workaround3-no-no-grad": "the training step taken out of torch.no_grad()",
    "deadend1-loss-requires-grad": "frozen model: loss.requires_grad_(True) before backward",
    "deadend2-data": "forward through weight.data instead of the parameter",
    "control-normal-step": "an ordinary training step",
}
NOT_WRITTEN = []

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
STEPS = 3


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, how="graph"):
        if how == "detach":
            return self.lin(x).detach()
        if how == "data":
            return x @ self.lin.weight.data.t() + self.lin.bias.data
        return self.lin(x)


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    dtype = DTYPES[precision]
    try:  # capability: a linear layer with backward in this dtype here
        probe = nn.Linear(2, 1).to(device=device, dtype=dtype)
        probe(torch.ones(3, 2, device=device, dtype=dtype)).float().pow(2).mean().backward()
    except RuntimeError as exc:
        raise Unsupported(
            "nn.Linear with backward in %s on %s is not implemented here: %s" % (dtype, device, exc)
        )
    torch.manual_seed(0)
    model = Net().to(device=device, dtype=dtype)
    x = torch.randn(32, 4, device=device, dtype=dtype)
    y = (x.float() @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]], device=device)).to(dtype)
    if variant in (
        "baseline-frozen-params",
        "deadend1-loss-requires-grad",
        "workaround1-requires-grad-true",
    ):
        model.requires_grad_(False)
    if variant == "workaround1-requires-grad-true":
        for p in model.parameters():
            p.requires_grad_(True)
    how = {
        "baseline-detached-forward": "detach",
        "workaround2-literal-check-graph": "detach",
        "deadend2-data": "data",
    }.get(variant, "graph")
    no_grad = variant == "baseline-no-grad-loop"
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    before = [p.detach().clone() for p in model.parameters()]
    skipped = 0
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            loss = (model(x, how).float() - y.float()).pow(2).mean()
            if variant == "workaround2-literal-check-graph" and loss.grad_fn is None:
                skipped += 1  # the check the entry describes: no graph, so no backward
                continue
            if variant == "deadend1-loss-requires-grad":
                loss.requires_grad_(True)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    moved = [(p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before)]
    return {
        "params_updated": {
            "ok": all(m > 0 for m in moved),
            "detail": "max |change| per parameter after %d steps: %s; steps skipped for lack of a graph: %d"
            % (STEPS, moved, skipped),
        },
        "loss_decreased": {
            "ok": len(losses) == STEPS and losses[-1] < losses[0],
            "detail": "losses %s" % losses,
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
