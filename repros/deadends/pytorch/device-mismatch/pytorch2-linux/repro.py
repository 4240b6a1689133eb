"""Reproducer: "Expected all tensors to be on the same device, but found at least two devices,
cuda:0 and cpu" (deadends/pytorch/device-mismatch/pytorch2-linux).

A classifier on the CUDA device given a batch left on the CPU, or trained with a class-weighted
loss whose weight tensor stayed on the CPU. Each variant applies one workaround or dead end of
the knowledge-base entry (https://deadends.dev/pytorch/device-mismatch/pytorch2-linux). Written
for CUDA cells (skipped where no CUDA device exists); dead end 2 also runs in CPU cells, where
its stated failure (code that hard-codes .cuda() breaks on a CPU-only machine) can show.

    python repro.py --list
    python repro.py --variant baseline-input-left-on-cpu --device cuda --precision fp32
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
    "baseline-input-left-on-cpu": "model.to(device); the batch stays on the CPU",
    "baseline-loss-weight-on-cpu": "model and batch on the device; CrossEntropyLoss(weight=...) built on the CPU",
    "workaround1-device-variable": "input-left-on-cpu fixed with one device variable and .to(device) for model and batch",
    "workaround2-literal-check-only": "the devices of model and batch compared before forward (assert), nothing moved",
    "workaround2-check-then-move": "the devices compared before forward; the batch moved to the model's device when they differ",
    "workaround3-loss-to-device": "loss-weight-on-cpu fixed with criterion.to(device)",
    "deadend1-create-on-gpu": "every tensor (batch, labels, class weights) created on the device from the start",
    "deadend2-cuda-everywhere": ".cuda() on model, batch, labels and criterion instead of .to(device)",
    "control-all-on-device": "model, batch, labels and criterion all moved with .to(device)",
}
NOT_WRITTEN = []


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("device placement does not depend on precision: run fp32 only")
    if device != "cuda" and variant != "deadend2-cuda-everywhere":
        raise Unsupported("a CPU/CUDA mismatch needs a CUDA device; this cell is %s" % device)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    x = torch.randn(16, 8)
    labels = torch.randint(0, 3, (16,))
    weight = torch.tensor([1.0, 2.0, 0.5])
    if variant == "deadend1-create-on-gpu":
        x = torch.randn(16, 8, device=dev)
        labels = torch.randint(0, 3, (16,), device=dev)
        weight = torch.tensor([1.0, 2.0, 0.5], device=dev)
    criterion = nn.CrossEntropyLoss(weight=weight)
    if variant == "deadend2-cuda-everywhere":
        model, x, labels, criterion = model.cuda(), x.cuda(), labels.cuda(), criterion.cuda()
    else:
        model = model.to(dev)
        if variant != "baseline-input-left-on-cpu" and not variant.startswith("workaround2"):
            x = x.to(dev)
        labels = labels.to(dev)
        if variant not in ("baseline-loss-weight-on-cpu",):
            criterion = criterion.to(dev)
    if variant == "workaround2-literal-check-only":
        model_dev = next(model.parameters()).device
        assert x.device == model_dev, "batch on %s, model on %s" % (x.device, model_dev)
    elif variant == "workaround2-check-then-move":
        model_dev = next(model.parameters()).device
        if x.device != model_dev:
            x = x.to(model_dev)
    out = model(x)
    loss = criterion(out, labels)
    loss.backward()
    return {
        "trained_on_the_cells_device": {
            "ok": out.device.type == dev.type and model.weight.grad is not None,
            "detail": "output on %s (cell: %s), weight.grad %s"
            % (out.device, device, "present" if model.weight.grad is not None else "missing"),
        },
        "loss_finite": {"ok": bool(torch.isfinite(loss).item()), "detail": "loss %s" % loss.item()},
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
