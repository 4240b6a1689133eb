"""Reproducer: "GradScaler unscale_() encountered None gradient" (pytorch/grad-scale-unscale-error).

A tiny model with a submodule that the forward pass never uses, trained with the usual
GradScaler loop (scale -> backward -> unscale_ -> step -> update). The document says
unscale_() raises on the unused parameters' None gradients; each variant applies one of
its workarounds or dead ends.

    python repro.py --list
    python repro.py --variant baseline-unused-submodule --device cpu --precision fp16

Precision: fp32 = no autocast, fp16/bf16 = torch.autocast with that dtype. The GradScaler
is used in every precision: it is what the document is about.
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
from reprokit import autocast, autocast_dtype, check_variant, finite, main, make_scaler, moved  # noqa: E402

# reprokit:end

STEPS = 3
LR = 0.1

VARIANTS = {
    "baseline-unused-submodule": "all parameters in the optimizer, one submodule unused in forward",
    "baseline-no-grad-params-only": "the optimizer holds only the unused submodule's parameters",
    "workaround1-literal": "optimizer built from [p ... if p.requires_grad and p.grad is not None] at construction",
    "workaround1-filter-after-backward": "the same filter, applied after a first backward",
    "workaround2-requires-grad-false": "requires_grad=False on the unused submodule",
    "workaround2-no-grad": "the auxiliary submodule runs under torch.no_grad() in forward",
    "deadend1-requires-grad-true": "requires_grad=True set on every parameter",
    "deadend2-unscale-twice": "scaler.unscale_(optimizer) called twice per step",
    "control-all-params-used": "every parameter used in forward, normal scaler loop",
}
NOT_WRITTEN: list[str] = []


class Net(nn.Module):
    def __init__(self, with_unused: bool = True, aux_under_no_grad: bool = False) -> None:
        super().__init__()
        self.used = nn.Linear(8, 8)
        self.head = nn.Linear(8, 1)
        self.unused = nn.Linear(8, 8) if with_unused else None
        self.aux_under_no_grad = aux_under_no_grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.used(x))
        if self.unused is not None and self.aux_under_no_grad:
            with torch.no_grad():  # workaround 2, no_grad reading: computed, but outside the graph
                aux = self.unused(x)
            h = h + 0.1 * aux
        return self.head(h)


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    dtype = autocast_dtype(device, precision)
    scaler, scaler_api = make_scaler(device)

    torch.manual_seed(0)
    model = Net(
        with_unused=variant != "control-all-params-used",
        aux_under_no_grad=variant == "workaround2-no-grad",
    ).to(device)
    x = torch.randn(16, 8, device=device)
    y = torch.randn(16, 1, device=device)

    if variant == "workaround2-requires-grad-false":
        model.unused.requires_grad_(False)
    if variant == "deadend1-requires-grad-true":
        for p in model.parameters():
            p.requires_grad_(True)

    # the parameters forward uses: whatever the optimizer holds, training must move them
    used = {n: p for n, p in model.named_parameters() if not n.startswith("unused.")}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def forward_backward() -> float:
        with autocast(device, dtype):
            out = model(x)
        loss = ((out.float() - y) ** 2).mean()
        scaler.scale(loss).backward()
        return loss.item()

    optimizer = None
    if variant == "workaround1-literal":
        # exactly as the document writes it; no backward has run yet
        optimizer = torch.optim.SGD(
            [p for p in model.parameters() if p.requires_grad and p.grad is not None], lr=0.01
        )
    elif variant == "baseline-no-grad-params-only":
        optimizer = torch.optim.SGD(model.unused.parameters(), lr=LR)
    elif variant != "workaround1-filter-after-backward":
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    losses = []
    scales = []
    for _ in range(STEPS):
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        losses.append(forward_backward())
        if optimizer is None:  # workaround 1, sensible reading: filter once gradients exist
            kept = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
            optimizer = torch.optim.SGD(kept, lr=LR)
        scales.append(scaler.get_scale())
        scaler.unscale_(optimizer)
        if variant == "deadend2-unscale-twice":
            scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()

    none_grads = sorted(n for n, p in model.named_parameters() if p.grad is None)
    n_opt = sum(len(g["params"]) for g in optimizer.param_groups)
    trained = moved(before, used, "parameters used in forward")
    trained["detail"] += "; optimizer holds %d tensors; None grads after the last step: %s" % (
        n_opt,
        none_grads,
    )
    losses_check = finite(losses)
    losses_check["detail"] += "; %s, scale per step %s, autocast dtype %s" % (
        scaler_api,
        scales,
        dtype,
    )
    return {"loss_finite": losses_check, "trained_params_moved": trained}


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN))
