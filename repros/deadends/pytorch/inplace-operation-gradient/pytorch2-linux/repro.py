"""Reproducer: "one of the variables needed for gradient computation has been modified by an
inplace operation" (deadends/pytorch/inplace-operation-gradient/pytorch2-linux).

A two-layer model whose hidden activation is a sigmoid: sigmoid's backward needs its own
output, so changing that output in place before backward breaks autograd. Each variant
applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/inplace-operation-gradient/pytorch2-linux).

    python repro.py --list
    python repro.py --variant baseline-add-inplace --device cpu --precision fp32
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
    "baseline-add-inplace": "h = sigmoid(.); h += 1 (in place) before backward",
    "baseline-relu-inplace": "nn.ReLU(inplace=True) applied to the sigmoid output",
    "workaround1-out-of-place": "h = h + 1 instead of h += 1",
    "workaround2-clone": "h = h.clone(); h += 1",
    "workaround3-relu-not-inplace": "nn.ReLU(inplace=False) on the sigmoid output",
    "deadend1-no-grad": "the in-place add wrapped in torch.no_grad()",
    "deadend2-data": "the in-place add done on h.data",
    "control-no-inplace": "no in-place change anywhere",
}
NOT_WRITTEN = []

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def model_step(variant: str, device: str, dtype: torch.dtype) -> dict:
    torch.manual_seed(0)
    first = nn.Linear(6, 5).to(device=device, dtype=dtype)
    second = nn.Linear(5, 1).to(device=device, dtype=dtype)
    x = torch.randn(8, 6, device=device, dtype=dtype)
    h = torch.sigmoid(first(x))
    if variant == "baseline-add-inplace":
        h += 1
    elif variant in ("baseline-relu-inplace", "workaround3-relu-not-inplace"):
        h = nn.ReLU(inplace=variant == "baseline-relu-inplace")(h)
    elif variant == "workaround1-out-of-place":
        h = h + 1
    elif variant == "workaround2-clone":
        h = h.clone()
        h += 1
    elif variant == "deadend1-no-grad":
        with torch.no_grad():
            h += 1
    elif variant == "deadend2-data":
        h.data += 1
    out = second(h).float().sum()
    out.backward()
    return {"first.weight": first.weight.grad, "second.weight": second.weight.grad}


def reference_grads(variant: str, device: str, dtype: torch.dtype) -> dict:
    """What the variant's computation's gradient is, computed without any in-place change."""
    torch.manual_seed(0)
    first = nn.Linear(6, 5).to(device=device, dtype=dtype)
    second = nn.Linear(5, 1).to(device=device, dtype=dtype)
    x = torch.randn(8, 6, device=device, dtype=dtype)
    h = torch.sigmoid(first(x))
    if variant in (
        "baseline-add-inplace",
        "workaround1-out-of-place",
        "workaround2-clone",
        "deadend1-no-grad",
        "deadend2-data",
    ):
        h = h + 1  # every one of these means "add 1 to the activation"
    elif variant in ("baseline-relu-inplace", "workaround3-relu-not-inplace"):
        h = torch.relu(h)
    second(h).float().sum().backward()
    return {"first.weight": first.weight.grad, "second.weight": second.weight.grad}


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    dtype = DTYPES[precision]
    try:  # capability: the ops of this model (linear, sigmoid, relu, backward) in this dtype here
        reference_grads("baseline-relu-inplace", device, dtype)
    except RuntimeError as exc:
        raise Unsupported(
            "linear/sigmoid/relu with backward in %s on %s is not implemented here: %s"
            % (dtype, device, exc)
        )
    grads = model_step(variant, device, dtype)
    want = reference_grads(variant, device, dtype)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    checks = {}
    for name, g in grads.items():
        ref = want[name]
        ok = g is not None and torch.allclose(g.float(), ref.float(), atol=tol, rtol=tol)
        err = (
            "no gradient"
            if g is None
            else "max |g - g_ref| = %.3g" % (g.float() - ref.float()).abs().max().item()
        )
        checks["grad_correct_" + name] = {
            "ok": bool(ok),
            "detail": "%s (gradient of the same computation without in-place changes; tolerance %g)"
            % (err, tol),
        }
    return checks


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
