"""Reproducer: "torch.cuda.amp.autocast only works with CUDA"
(deadends/pytorch/amp-autocast-error/pt2-linux).

One mixed-precision training step of a small model whose tensors live on the cell's device,
with CUDA autocast entered around it: on a CPU cell, CUDA autocast wraps CPU tensors (on a
machine without CUDA, autocast for a device that is not there). Each variant applies one
workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/amp-autocast-error/pt2-linux). The cell's precision is the
autocast dtype asked for (entry.yaml runs fp16 and bf16 only).
"""

from __future__ import annotations

import contextlib

import torch
from reprokit import Unsupported, autocast_dtype
from torch import nn

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
LR = 0.1


def produced_dtype(device: str, make_ctx) -> torch.dtype:
    a = torch.ones(4, 4, device=device)
    with make_ctx():
        return torch.mm(a, a).dtype


def train_step(device, precision, autocast_for, run_on=None, wants_mixed=True) -> dict:
    """One step on ``run_on`` (default: the cell's device), its forward under the context
    ``autocast_for(dtype)`` makes; ``wants_mixed``: the variant means AMP to be in effect."""
    low = DTYPES[precision]
    run_on = run_on or device

    def ctx():
        return autocast_for(low)

    torch.manual_seed(0)
    model = nn.Linear(8, 1).to(run_on)
    x = torch.randn(16, 8).to(run_on)
    y = torch.randn(16, 1).to(run_on)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    before = model.weight.detach().clone()
    with ctx():
        out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    mixed = produced_dtype(run_on, ctx)
    return {
        "trained": {
            "ok": bool(torch.isfinite(loss).item())
            and (model.weight.detach() - before).abs().max().item() > 0,
            "detail": "loss %.4g on %s, weights moved by %.3g"
            % (loss.item(), run_on, (model.weight.detach() - before).abs().max().item()),
        },
        "mixed_precision_in_effect": {
            # the point of AMP: matmuls run in the asked dtype. Variants that switch AMP off on
            # purpose (dead end 1; workaround 2 without CUDA) are not held to it
            "ok": mixed == low or not wants_mixed,
            "detail": "torch.mm under the variant's context produced %s on %s (asked %s%s)"
            % (
                mixed,
                run_on,
                low,
                "" if wants_mixed else "; this variant turns AMP off on purpose",
            ),
        },
    }


def cuda_autocast_generic(low: torch.dtype):
    return torch.autocast(device_type="cuda", dtype=low)


def no_autocast(low: torch.dtype):
    return contextlib.nullcontext()


def baseline_cuda_amp_autocast(device, precision):
    return train_step(device, precision, lambda low: torch.cuda.amp.autocast(dtype=low))


def baseline_autocast_device_type_cuda(device, precision):
    return train_step(device, precision, cuda_autocast_generic)


def workaround1_autocast_own_device(device, precision):
    autocast_dtype(device, precision)  # Unsupported where autocast on this device cannot run it
    if not hasattr(torch, "amp") or not hasattr(torch.amp, "autocast"):
        raise Unsupported("torch.amp.autocast does not exist in torch %s" % torch.__version__)
    return train_step(
        device, precision, lambda low: torch.amp.autocast(device_type=device, dtype=low)
    )


def workaround2_enable_if_cuda_available(device, precision):
    return train_step(
        device,
        precision,
        lambda low: torch.cuda.amp.autocast(enabled=torch.cuda.is_available(), dtype=low),
        wants_mixed=torch.cuda.is_available(),
    )


def deadend1_no_amp(device, precision):
    # the user wanted mixed precision: dropping autocast trains, without it
    return train_step(device, precision, no_autocast)


def deadend2_force_cuda(device, precision):
    return train_step(device, precision, cuda_autocast_generic, run_on="cuda")


def control_float32_step(device, precision):
    return train_step(device, precision, no_autocast, wants_mixed=False)


def control_autocast_on_cuda_tensors(device, precision):
    return train_step(device, precision, cuda_autocast_generic)


VARIANTS = {
    "baseline-cuda-amp-autocast": baseline_cuda_amp_autocast,
    "baseline-autocast-device-type-cuda": baseline_autocast_device_type_cuda,
    "workaround1-autocast-own-device": workaround1_autocast_own_device,
    "workaround2-enable-if-cuda-available": workaround2_enable_if_cuda_available,
    "deadend1-no-amp": deadend1_no_amp,
    "deadend2-force-cuda": deadend2_force_cuda,
    "control-float32-step": control_float32_step,
    "control-autocast-on-cuda-tensors": control_autocast_on_cuda_tensors,
}
