"""Reproducer: "torch.cuda.amp.autocast only works with CUDA"
(deadends/pytorch/amp-autocast-error/pt2-linux).

One mixed-precision training step of a small model whose tensors live on the cell's device,
with CUDA autocast entered around it: on a CPU cell, CUDA autocast wraps CPU tensors (on a
machine without CUDA, autocast for a device that is not there). Each variant applies one
workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/amp-autocast-error/pt2-linux). The cell's precision is the
autocast dtype asked for (fp32 cells have no mixed precision and are not run).

    python repro.py --list
    python repro.py --variant baseline-cuda-amp-autocast --device cpu --precision bf16
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
from reprokit import Unsupported, autocast_dtype, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-cuda-amp-autocast": "with torch.cuda.amp.autocast(dtype=...): around a step on the cell's device",
    "baseline-autocast-device-type-cuda": "with torch.autocast(device_type='cuda', dtype=...): the same, through the generic API",
    "workaround1-autocast-own-device": "torch.amp.autocast(device_type=<the tensors' device>, dtype=...)",
    "workaround2-enable-if-cuda-available": "torch.cuda.amp.autocast(enabled=torch.cuda.is_available(), dtype=...)",
    "deadend1-no-amp": "no autocast at all: the step in float32",
    "deadend2-force-cuda": "the model and data moved to 'cuda' whatever the cell's device",
    "control-float32-step": "the same step with no autocast: the model trains on this device",
    "control-autocast-on-cuda-tensors": "CUDA autocast around tensors on the CUDA device (CUDA cells only)",
}
NOT_WRITTEN = []

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def produced_dtype(device: str, make_ctx) -> torch.dtype:
    a = torch.ones(4, 4, device=device)
    with make_ctx():
        return torch.mm(a, a).dtype


def run(variant: str, device: str = "cpu", precision: str = "bf16") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision == "fp32":
        raise Unsupported("fp32 asks for no mixed precision: run fp16 or bf16")
    low = DTYPES[precision]
    if variant == "control-autocast-on-cuda-tensors" and device != "cuda":
        raise Unsupported("the control needs tensors on a CUDA device; this cell is %s" % device)
    if variant == "workaround1-autocast-own-device":
        autocast_dtype(
            device, precision
        )  # Unsupported where autocast on this device cannot produce `low`
        if not hasattr(torch, "amp") or not hasattr(torch.amp, "autocast"):
            raise Unsupported("torch.amp.autocast does not exist in torch %s" % torch.__version__)
    run_on = "cuda" if variant == "deadend2-force-cuda" else device
    if variant == "baseline-cuda-amp-autocast":
        ctx = lambda: torch.cuda.amp.autocast(dtype=low)  # noqa: E731
    elif variant in ("baseline-autocast-device-type-cuda", "control-autocast-on-cuda-tensors"):
        ctx = lambda: torch.autocast(device_type="cuda", dtype=low)  # noqa: E731
    elif variant == "workaround1-autocast-own-device":
        ctx = lambda: torch.amp.autocast(device_type=device, dtype=low)  # noqa: E731
    elif variant == "workaround2-enable-if-cuda-available":
        ctx = lambda: torch.cuda.amp.autocast(enabled=torch.cuda.is_available(), dtype=low)  # noqa: E731
    elif variant == "deadend2-force-cuda":
        ctx = lambda: torch.autocast(device_type="cuda", dtype=low)  # noqa: E731
    else:
        ctx = contextlib.nullcontext
    torch.manual_seed(0)
    model = nn.Linear(8, 1).to(run_on)
    x = torch.randn(16, 8).to(run_on)
    y = torch.randn(16, 1).to(run_on)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    with ctx():
        out = model(x)
    loss = (out.float() - y).pow(2).mean()
    loss.backward()
    opt.step()
    mixed = produced_dtype(run_on, ctx)
    wants_mixed = variant not in ("deadend1-no-amp", "control-float32-step") and not (
        variant == "workaround2-enable-if-cuda-available" and not torch.cuda.is_available()
    )
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


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="bf16"))
