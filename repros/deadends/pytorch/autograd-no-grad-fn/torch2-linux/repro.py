"""Reproducer: "element 0 of tensors does not require grad and does not have a grad_fn"
(deadends/pytorch/autograd-no-grad-fn/torch2-linux).

A small regression trained with SGD for a few steps. Each baseline loses the graph in one of
the ways the knowledge-base entry names (frozen parameters, a forward through detached values,
the loop under torch.no_grad()); each workaround and dead end variant applies one of the
entry's (https://deadends.dev/pytorch/autograd-no-grad-fn/torch2-linux) to the baseline it
addresses.
"""

from __future__ import annotations

import contextlib

import torch
from reprokit import Unsupported
from torch import nn

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


def train(
    device,
    precision,
    how="graph",
    frozen=False,
    unfreeze=False,
    no_grad=False,
    check_graph=False,
    loss_requires_grad=False,
) -> dict:
    """STEPS steps of SGD; ``how`` the forward goes (see Net), the parameters ``frozen``
    (then ``unfreeze``d), the step under torch.no_grad(), the step skipped when the loss has
    no grad_fn (``check_graph``), loss.requires_grad_(True) before backward."""
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
    if frozen:
        model.requires_grad_(False)
    if unfreeze:
        for p in model.parameters():
            p.requires_grad_(True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    before = [p.detach().clone() for p in model.parameters()]
    skipped = 0
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            loss = (model(x, how).float() - y.float()).pow(2).mean()
            if check_graph and loss.grad_fn is None:
                skipped += 1  # the check the entry describes: no graph, so no backward
                continue
            if loss_requires_grad:
                loss.requires_grad_(True)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    moved = [(p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before)]
    if check_graph:
        # what the check is for: telling, before backward, that the loss has no graph
        return {
            "missing_graph_detected": {
                "ok": skipped == STEPS,
                "detail": "loss.grad_fn was None (the step skipped before backward) in %d of %d "
                "steps" % (skipped, STEPS),
            }
        }
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


def baseline_frozen_params(device, precision):
    return train(device, precision, frozen=True)


def baseline_detached_forward(device, precision):
    return train(device, precision, how="detach")


def baseline_no_grad_loop(device, precision):
    return train(device, precision, no_grad=True)


def workaround1_requires_grad_true(device, precision):
    return train(device, precision, frozen=True, unfreeze=True)


def workaround2_literal_check_graph(device, precision):
    return train(device, precision, how="detach", check_graph=True)


def workaround2_forward_builds_graph(device, precision):
    return train(device, precision)


def workaround3_no_no_grad(device, precision):
    return train(device, precision)


def deadend1_loss_requires_grad(device, precision):
    return train(device, precision, frozen=True, loss_requires_grad=True)


def deadend2_data(device, precision):
    return train(device, precision, how="data")


def control_normal_step(device, precision):
    return train(device, precision)


VARIANTS = {
    "baseline-frozen-params": baseline_frozen_params,
    "baseline-detached-forward": baseline_detached_forward,
    "baseline-no-grad-loop": baseline_no_grad_loop,
    "workaround1-requires-grad-true": workaround1_requires_grad_true,
    "workaround2-literal-check-graph": workaround2_literal_check_graph,
    "workaround2-forward-builds-graph": workaround2_forward_builds_graph,
    "workaround3-no-no-grad": workaround3_no_no_grad,
    "deadend1-loss-requires-grad": deadend1_loss_requires_grad,
    "deadend2-data": deadend2_data,
    "control-normal-step": control_normal_step,
}
