"""Reproducer: "The size of tensor a must match the size of tensor b"
(deadends/pytorch/broadcast-shape-mismatch/pt2-linux).

Per-sample weights of shape (N,) multiplied into features of shape (N, F): the trailing
dimensions do not broadcast. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/broadcast-shape-mismatch/pt2-linux); the
intended result is every row i of the features scaled by weight i.

    python repro.py --list
    python repro.py --variant baseline-rowwise-scale --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-rowwise-scale": "features (2, 4) * weights (2,): trailing sizes 4 and 2",
    "workaround1-unsqueeze": "weights.unsqueeze(1): (2, 1) broadcasts over the features",
    "workaround1-view": "weights.view(-1, 1), the .view() form of the same fix",
    "workaround2-literal-check-only": "torch.broadcast_shapes() called first, as a check only",
    "workaround2-check-then-fix": "torch.broadcast_shapes() first; on failure add the missing trailing axis",
    "deadend1-reshape-arbitrarily": "features reshaped to (4, 2) so the sizes fit, then back to (2, 4)",
    "deadend2-expand-both": "both tensors .expand()ed to the larger shape (2, 4)",
    "control-matching-shapes": "features * features: equal shapes",
}
NOT_WRITTEN = []

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    dtype = DTYPES[precision]
    try:  # capability: elementwise multiply in this dtype here
        torch.ones(2, device=device, dtype=dtype) * torch.ones(2, device=device, dtype=dtype)
    except RuntimeError as exc:
        raise Unsupported("mul in %s on %s is not implemented here: %s" % (dtype, device, exc))
    if variant.startswith("workaround2") and not hasattr(torch, "broadcast_shapes"):
        raise Unsupported("torch.broadcast_shapes does not exist in torch %s" % torch.__version__)
    x = torch.arange(8, device=device).to(dtype).view(2, 4)  # features: 2 samples, 4 features
    w = torch.tensor([1.0, 10.0], device=device).to(dtype)  # one weight per sample
    want = x * w.view(2, 1)
    if variant == "baseline-rowwise-scale":
        out = x * w
    elif variant == "workaround1-unsqueeze":
        out = x * w.unsqueeze(1)
    elif variant == "workaround1-view":
        out = x * w.view(-1, 1)
    elif variant == "workaround2-literal-check-only":
        torch.broadcast_shapes(x.shape, w.shape)
        out = x * w
    elif variant == "workaround2-check-then-fix":
        try:
            torch.broadcast_shapes(x.shape, w.shape)
            ww = w
        except RuntimeError:
            ww = w.view(w.shape + (1,) * (x.dim() - w.dim()))
        out = x * ww
    elif variant == "deadend1-reshape-arbitrarily":
        out = (x.reshape(4, 2) * w).reshape(2, 4)
    elif variant == "deadend2-expand-both":
        shape = (max(x.shape[0], w.shape[0]), x.shape[1])
        out = x.expand(*shape) * w.expand(*shape)
    else:  # control
        out = x * x
        want = x.float().pow(2).to(dtype)
    ok = tuple(out.shape) == tuple(want.shape) and torch.equal(out, want)
    return {
        "rows_scaled_by_their_weight": {
            "ok": bool(ok),
            "detail": "got %s, expected %s" % (out.float().tolist(), want.float().tolist()),
        }
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
