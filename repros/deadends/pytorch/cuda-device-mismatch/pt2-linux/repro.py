"""Reproducer: "Expected all tensors to be on the same device"
(deadends/pytorch/cuda-device-mismatch/pt2-linux).

A model moved to the CUDA device and an input batch left on the CPU: one training step.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/cuda-device-mismatch/pt2-linux). Written for CUDA cells; the
harness skips them where no CUDA device exists.

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
    "baseline-input-left-on-cpu": "model.to('cuda'); the batch stays on the CPU",
    "workaround1-literal-model-device": "batch.to(model.device), as the entry writes it",
    "workaround1-parameter-device": "batch.to(next(model.parameters()).device)",
    "workaround2-one-device-variable": "device = torch.device('cuda:0') defined once; model and batch .to(device)",
    "deadend1-everything-on-cpu": "model and batch both kept on the CPU",
    "deadend2-cuda-without-index": "model.cuda() and batch.cuda() with no device index",
    "control-both-on-cuda": "model and batch created on the CUDA device",
}
NOT_WRITTEN = []


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cuda":
        raise Unsupported("a CPU/CUDA mismatch needs a CUDA device; this cell is %s" % device)
    if precision != "fp32":
        raise Unsupported("device placement does not depend on precision: run fp32 only")
    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    x = torch.randn(16, 8)
    y = torch.randn(16, 2)
    if variant == "deadend1-everything-on-cpu":
        pass
    elif variant == "deadend2-cuda-without-index":
        model, x, y = model.cuda(), x.cuda(), y.cuda()
    elif variant == "workaround2-one-device-variable":
        dev = torch.device("cuda:0")
        model, x, y = model.to(dev), x.to(dev), y.to(dev)
    elif variant == "control-both-on-cuda":
        model = model.to("cuda")
        x, y = torch.randn(16, 8, device="cuda"), torch.randn(16, 2, device="cuda")
    else:
        model = model.to("cuda")
        y = y.to("cuda")
        if variant == "workaround1-literal-model-device":
            x = x.to(model.device)  # nn.Module has no .device attribute
        elif variant == "workaround1-parameter-device":
            x = x.to(next(model.parameters()).device)
    out = model(x)
    loss = (out - y).pow(2).mean()
    loss.backward()
    return {
        "trained_on_the_gpu": {
            # the cell asks for CUDA: a step that runs elsewhere has given up the GPU
            "ok": out.device.type == "cuda" and model.weight.grad is not None,
            "detail": "output on %s, weight.grad %s"
            % (out.device, "present" if model.weight.grad is not None else "missing"),
        },
        "loss_finite": {"ok": bool(torch.isfinite(loss).item()), "detail": "loss %s" % loss.item()},
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
