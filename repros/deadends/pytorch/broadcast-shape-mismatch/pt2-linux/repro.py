"""Reproducer: "The size of tensor a must match the size of tensor b"
(deadends/pytorch/broadcast-shape-mismatch/pt2-linux).

Per-sample weights of shape (N,) multiplied into features of shape (N, F): the trailing
dimensions do not broadcast. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/broadcast-shape-mismatch/pt2-linux); the
intended result is every row i of the features scaled by weight i.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def scale_rows(device, precision, multiply, expected=None) -> dict:
    """``multiply(x, w)`` against x * w.view(2, 1) (or ``expected(x)``), where x is 2 samples
    of 4 features and w one weight per sample."""
    dtype = DTYPES[precision]
    try:  # capability: elementwise multiply in this dtype here
        torch.ones(2, device=device, dtype=dtype) * torch.ones(2, device=device, dtype=dtype)
    except RuntimeError as exc:
        raise Unsupported("mul in %s on %s is not implemented here: %s" % (dtype, device, exc))
    x = torch.arange(8, device=device).to(dtype).view(2, 4)  # features: 2 samples, 4 features
    w = torch.tensor([1.0, 10.0], device=device).to(dtype)  # one weight per sample
    want = x * w.view(2, 1) if expected is None else expected(x)
    out = multiply(x, w)
    ok = tuple(out.shape) == tuple(want.shape) and torch.equal(out, want)
    return {
        "rows_scaled_by_their_weight": {
            "ok": bool(ok),
            "detail": "got %s, expected %s" % (out.float().tolist(), want.float().tolist()),
        }
    }


def needs_broadcast_shapes() -> None:
    if not hasattr(torch, "broadcast_shapes"):
        raise Unsupported("torch.broadcast_shapes does not exist in torch %s" % torch.__version__)


def baseline_rowwise_scale(device, precision):
    return scale_rows(device, precision, lambda x, w: x * w)


def workaround1_unsqueeze(device, precision):
    return scale_rows(device, precision, lambda x, w: x * w.unsqueeze(1))


def workaround1_view(device, precision):
    return scale_rows(device, precision, lambda x, w: x * w.view(-1, 1))


def shape_check(faulty=(2,), good=(2, 1)) -> dict:
    """The workaround's literal reading is a check ("use torch.broadcast_shapes() to verify
    compatibility first"), judged by detection: against the (2, 4) features it must flag
    the per-sample weights of shape ``faulty`` (it raises) and pass the weights of shape
    ``good``; nothing is multiplied."""
    needs_broadcast_shapes()
    verdicts = {}
    for label, shape in (("faulty", faulty), ("good", good)):
        try:
            result = "passes: %s" % (tuple(torch.broadcast_shapes((2, 4), shape)),)
            verdicts[label] = (False, result)
        except RuntimeError as exc:
            verdicts[label] = (True, "flags it: %s" % str(exc).splitlines()[0])
    return {
        "flags_the_faulty_shapes": {
            "ok": verdicts["faulty"][0],
            "detail": "(2, 4) with %s: %s" % (faulty, verdicts["faulty"][1]),
        },
        "passes_good_shapes": {
            "ok": not verdicts["good"][0],
            "detail": "(2, 4) with %s: %s" % (good, verdicts["good"][1]),
        },
    }


def workaround2_literal_check_only(device, precision):
    return shape_check()


def workaround2_check_then_fix(device, precision):
    def check_then_fix(x, w):
        needs_broadcast_shapes()
        try:
            torch.broadcast_shapes(x.shape, w.shape)
            ww = w
        except RuntimeError:
            ww = w.view(w.shape + (1,) * (x.dim() - w.dim()))
        return x * ww

    return scale_rows(device, precision, check_then_fix)


def deadend1_reshape_arbitrarily(device, precision):
    return scale_rows(device, precision, lambda x, w: (x.reshape(4, 2) * w).reshape(2, 4))


def deadend2_expand_both(device, precision):
    def expand_both(x, w):
        shape = (max(x.shape[0], w.shape[0]), x.shape[1])
        return x.expand(*shape) * w.expand(*shape)

    return scale_rows(device, precision, expand_both)


def control_matching_shapes(device, precision):
    dtype = DTYPES[precision]
    return scale_rows(
        device, precision, lambda x, w: x * x, expected=lambda x: x.float().pow(2).to(dtype)
    )


VARIANTS = {
    "baseline-rowwise-scale": baseline_rowwise_scale,
    "workaround1-unsqueeze": workaround1_unsqueeze,
    "workaround1-view": workaround1_view,
    "workaround2-literal-check-only": workaround2_literal_check_only,
    "workaround2-check-then-fix": workaround2_check_then_fix,
    "deadend1-reshape-arbitrarily": deadend1_reshape_arbitrarily,
    "deadend2-expand-both": deadend2_expand_both,
    "control-matching-shapes": control_matching_shapes,
}
