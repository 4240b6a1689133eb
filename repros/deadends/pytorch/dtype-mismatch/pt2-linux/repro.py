"""Reproducer: "expected scalar type Float but found Half" (deadends/pytorch/dtype-mismatch/pt2-linux).

A float32 nn.Linear applied to an input in the cell's low precision (fp16: Half, bf16:
BFloat16), as when data comes from a half-precision pipeline into a float32 model. Each
variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/dtype-mismatch/pt2-linux). fp32 cells have no mismatch to show
and are not run.

    python repro.py --list
    python repro.py --variant baseline-half-input --device cpu --precision fp16
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
    "baseline-half-input": "float32 nn.Linear(8, 4) called on a low-precision input",
    "workaround1-cast-input": "input.float() before the layer",
    "workaround2-autocast": "the call inside torch.autocast(device, dtype=the input's dtype)",
    "deadend1-float64": "model and input both cast to float64",
    "deadend2-autocast-disabled": "the call inside torch.autocast(device, enabled=False)",
    "control-float32": "float32 model, float32 input",
}
NOT_WRITTEN = []

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def run(variant: str, device: str = "cpu", precision: str = "fp16") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision == "fp32":
        raise Unsupported("fp32 has no low-precision input to mismatch (run fp16 or bf16)")
    low = DTYPES[precision]
    if variant == "workaround2-autocast":
        autocast_dtype(device, precision)  # Unsupported where autocast cannot produce `low` here
    torch.manual_seed(0)
    model = nn.Linear(8, 4).to(device)
    x32 = torch.randn(5, 8, device=device)
    reference = model(x32).detach().double()
    x = x32.to(low)
    ctx = contextlib.nullcontext()
    if variant == "workaround1-cast-input":
        x = x.float()
    elif variant == "workaround2-autocast":
        ctx = torch.autocast(device, dtype=low)
    elif variant == "deadend1-float64":
        model = model.double()
        x = x.double()
    elif variant == "deadend2-autocast-disabled":
        ctx = torch.autocast(device, enabled=False)  # autocast off, whatever its dtype
    elif variant == "control-float32":
        x = x32
    with ctx:
        out = model(x)
    out.float().sum().backward()
    # the input was rounded to `low`; the layer's result may differ from float32 by that much
    tol = 0.0 if variant == "control-float32" else 0.1
    err = (out.detach().double() - reference).abs().max().item()
    return {
        "output_matches_float32": {
            "ok": err <= tol + 1e-5,
            "detail": "max |out - float32 reference| = %.4g (allowed %.3g); output dtype %s"
            % (err, tol, out.dtype),
        },
        "weight_grad": {
            "ok": model.weight.grad is not None and bool(torch.isfinite(model.weight.grad).all()),
            "detail": "weight.grad %s"
            % ("missing" if model.weight.grad is None else "dtype %s" % model.weight.grad.dtype),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="bf16"))
