"""Reproducer: "GradScaler unscale_() encountered None gradient" (pytorch/grad-scale-unscale-error).

A tiny model with a submodule that the forward pass never uses, trained with the usual
GradScaler loop (scale -> backward -> unscale_ -> step -> update). The document says
unscale_() raises on the unused parameters' None gradients; each variant applies one of
its workarounds or dead ends.

Precision: fp32 = no autocast, fp16/bf16 = torch.autocast with that dtype. The GradScaler
is used in every precision: it is what the document is about.
"""

from __future__ import annotations

import torch
from reprokit import autocast, autocast_dtype, finite, make_scaler, moved
from torch import nn

STEPS = 3
LR = 0.1


class Net(nn.Module):
    def __init__(self, with_unused: bool = True) -> None:
        super().__init__()
        self.used, self.head = nn.Linear(8, 8), nn.Linear(8, 1)
        self.unused = nn.Linear(8, 8) if with_unused else None  # never used in forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.used(x)))


class AuxUnderNoGrad(Net):
    """Workaround 2, torch.no_grad() reading: the auxiliary submodule is computed in
    forward, outside the graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            aux = self.unused(x)
        return self.head(torch.relu(self.used(x)) + 0.1 * aux)


def train(device, precision, net=Net, optimizer=None, prepare=None, unscale_twice=False):
    """The scaler loop on a fresh ``net()``, ``prepare(model)`` first; ``optimizer(model)``
    builds the optimizer, or (None) SGD over the parameters with gradients after one backward."""
    dtype = autocast_dtype(device, precision)
    scaler, scaler_api = make_scaler(device)
    torch.manual_seed(0)
    model = net().to(device)
    x, y = torch.randn(16, 8, device=device), torch.randn(16, 1, device=device)
    if prepare is not None:
        prepare(model)
    # the parameters forward uses: whatever the optimizer holds, training must move them
    used = {n: p for n, p in model.named_parameters() if not n.startswith("unused.")}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = None if optimizer is None else optimizer(model)
    losses, scales = [], []
    for _ in range(STEPS):
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        with autocast(device, dtype):
            out = model(x)
        loss = ((out.float() - y) ** 2).mean()
        scaler.scale(loss).backward()
        losses.append(loss.item())
        if opt is None:
            kept = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
            opt = torch.optim.SGD(kept, lr=LR)
        scales.append(scaler.get_scale())
        scaler.unscale_(opt)
        if unscale_twice:
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    none_grads = sorted(n for n, p in model.named_parameters() if p.grad is None)
    n_opt = sum(len(g["params"]) for g in opt.param_groups)
    trained = moved(before, used, "parameters used in forward")
    note = "; optimizer holds %d tensors; None grads after the last step: %s"
    trained["detail"] += note % (n_opt, none_grads)
    losses_check = finite(losses)
    note = "; %s, scale per step %s, autocast dtype %s"
    losses_check["detail"] += note % (scaler_api, scales, dtype)
    return {"loss_finite": losses_check, "trained_params_moved": trained}


def sgd(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=LR)


def baseline_unused_submodule(device, precision):
    return train(device, precision, Net, sgd)


def baseline_no_grad_params_only(device, precision):
    # only the parameters that get no gradient: the extreme case of the root cause
    return train(device, precision, Net, lambda m: torch.optim.SGD(m.unused.parameters(), lr=LR))


def workaround1_literal(device, precision):
    # exactly as the document writes it, at construction: no backward has run yet
    def literal(model: nn.Module) -> torch.optim.Optimizer:
        kept = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
        return torch.optim.SGD(kept, lr=0.01)

    return train(device, precision, Net, literal)


def workaround1_filter_after_backward(device, precision):
    return train(device, precision, Net, None)


def workaround2_requires_grad_false(device, precision):
    return train(device, precision, Net, sgd, lambda m: m.unused.requires_grad_(False))


def workaround2_no_grad(device, precision):
    return train(device, precision, AuxUnderNoGrad, sgd)


def deadend1_requires_grad_true(device, precision):
    def every_parameter(model: nn.Module) -> None:
        for p in model.parameters():
            p.requires_grad_(True)

    return train(device, precision, Net, sgd, every_parameter)


def deadend2_unscale_twice(device, precision):
    return train(device, precision, Net, sgd, unscale_twice=True)


def control_all_params_used(device, precision):
    return train(device, precision, lambda: Net(with_unused=False), sgd)


VARIANTS = {
    "baseline-unused-submodule": baseline_unused_submodule,
    "baseline-no-grad-params-only": baseline_no_grad_params_only,
    "workaround1-literal": workaround1_literal,
    "workaround1-filter-after-backward": workaround1_filter_after_backward,
    "workaround2-requires-grad-false": workaround2_requires_grad_false,
    "workaround2-no-grad": workaround2_no_grad,
    "deadend1-requires-grad-true": deadend1_requires_grad_true,
    "deadend2-unscale-twice": deadend2_unscale_twice,
    "control-all-params-used": control_all_params_used,
}
