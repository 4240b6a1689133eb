"""Reproducer: "expected scalar type Float but found Half" (deadends/pytorch/dtype-mismatch/pt2-linux).

A float32 nn.Linear applied to an input in the cell's low precision (fp16: Half, bf16:
BFloat16), as when data comes from a half-precision pipeline into a float32 model. Each
variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/dtype-mismatch/pt2-linux). fp32 cells have no mismatch to show
and are not run (entry.yaml: fp16 and bf16).
"""

from __future__ import annotations

import contextlib

import torch
from reprokit import autocast_dtype
from torch import nn

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def forward_backward(device, precision, adapt=None, context=None, tol=0.1) -> dict:
    """A float32 Linear on the input in the cell's low dtype, ``adapt(model, x, x32)`` ->
    (model, x) first, the call under ``context(low)``; against the float32 result."""
    low = DTYPES[precision]
    torch.manual_seed(0)
    model = nn.Linear(8, 4).to(device)
    x32 = torch.randn(5, 8, device=device)
    reference = model(x32).detach().double()
    x = x32.to(low)
    if adapt is not None:
        model, x = adapt(model, x, x32)
    with context(low) if context is not None else contextlib.nullcontext():
        out = model(x)
    out.float().sum().backward()
    # the input was rounded to `low`; the layer's result may differ from float32 by that much
    err = (out.detach().double() - reference).abs().max().item()
    return {
        "output_matches_float32": {
            "ok": err <= tol + 1e-5,
            "detail": "max |out - float32 reference| = %.4g (allowed %.3g); output dtype %s"
            % (err, tol, out.dtype),
        },
        # what float64 costs: twice the memory of float32 for every parameter
        "params_at_most_float32": {
            "ok": all(p.element_size() <= 4 for p in model.parameters()),
            "detail": "parameter dtypes %s" % sorted({str(p.dtype) for p in model.parameters()}),
        },
        "weight_grad": {
            "ok": model.weight.grad is not None and bool(torch.isfinite(model.weight.grad).all()),
            "detail": "weight.grad %s"
            % ("missing" if model.weight.grad is None else "dtype %s" % model.weight.grad.dtype),
        },
    }


def baseline_half_input(device, precision):
    return forward_backward(device, precision)


def workaround1_cast_input(device, precision):
    return forward_backward(device, precision, lambda model, x, x32: (model, x.float()))


def workaround2_autocast(device, precision):
    autocast_dtype(device, precision)  # Unsupported where autocast cannot produce it here
    return forward_backward(
        device, precision, context=lambda low: torch.autocast(device, dtype=low)
    )


def deadend1_float64(device, precision):
    return forward_backward(device, precision, lambda model, x, x32: (model.double(), x.double()))


def deadend2_autocast_disabled(device, precision):
    # autocast off, whatever its dtype
    return forward_backward(
        device, precision, context=lambda low: torch.autocast(device, enabled=False)
    )


def control_float32(device, precision):
    return forward_backward(device, precision, lambda model, x, x32: (model, x32), tol=0.0)


VARIANTS = {
    "baseline-half-input": baseline_half_input,
    "workaround1-cast-input": workaround1_cast_input,
    "workaround2-autocast": workaround2_autocast,
    "deadend1-float64": deadend1_float64,
    "deadend2-autocast-disabled": deadend2_autocast_disabled,
    "control-float32": control_float32,
}
