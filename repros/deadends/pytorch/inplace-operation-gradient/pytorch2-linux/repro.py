"""Reproducer: "one of the variables needed for gradient computation has been modified by an
inplace operation" (deadends/pytorch/inplace-operation-gradient/pytorch2-linux).

A two-layer model whose hidden activation is a sigmoid: sigmoid's backward needs its own
output, so changing that output in place before backward breaks autograd. Each variant
applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/inplace-operation-gradient/pytorch2-linux).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def grads(device, dtype, change) -> dict:
    """The weights' gradients of second(change(sigmoid(first(x)))).sum()."""
    torch.manual_seed(0)
    first = nn.Linear(6, 5).to(device=device, dtype=dtype)
    second = nn.Linear(5, 1).to(device=device, dtype=dtype)
    x = torch.randn(8, 6, device=device, dtype=dtype)
    h = change(torch.sigmoid(first(x)))
    second(h).float().sum().backward()
    return {"first.weight": first.weight.grad, "second.weight": second.weight.grad}


def add_one(h):
    return h + 1


def compare(device, precision, change, meaning=lambda h: h) -> dict:
    """The variant's ``change`` of the activation against what it means, computed without
    any in-place change (``meaning``)."""
    dtype = DTYPES[precision]
    try:  # capability: the ops of this model (linear, sigmoid, relu, backward) in this dtype here
        grads(device, dtype, torch.relu)
    except RuntimeError as exc:
        raise Unsupported(
            "linear/sigmoid/relu with backward in %s on %s is not implemented here: %s"
            % (dtype, device, exc)
        )
    got = grads(device, dtype, change)
    want = grads(device, dtype, meaning)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    checks = {}
    for name, g in got.items():
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


def baseline_add_inplace(device, precision):
    def add_in_place(h):
        h += 1
        return h

    return compare(device, precision, add_in_place, add_one)


def baseline_relu_inplace(device, precision):
    return compare(device, precision, nn.ReLU(inplace=True), torch.relu)


def workaround1_out_of_place(device, precision):
    return compare(device, precision, add_one, add_one)


def workaround2_clone(device, precision):
    def clone_then_add(h):
        h = h.clone()
        h += 1
        return h

    return compare(device, precision, clone_then_add, add_one)


def workaround3_relu_not_inplace(device, precision):
    return compare(device, precision, nn.ReLU(inplace=False), torch.relu)


def deadend1_no_grad(device, precision):
    def add_under_no_grad(h):
        with torch.no_grad():
            h += 1
        return h

    return compare(device, precision, add_under_no_grad, add_one)


def deadend2_data(device, precision):
    def add_to_data(h):
        h.data += 1
        return h

    return compare(device, precision, add_to_data, add_one)


def control_no_inplace(device, precision):
    return compare(device, precision, lambda h: h)


VARIANTS = {
    "baseline-add-inplace": baseline_add_inplace,
    "baseline-relu-inplace": baseline_relu_inplace,
    "workaround1-out-of-place": workaround1_out_of_place,
    "workaround2-clone": workaround2_clone,
    "workaround3-relu-not-inplace": workaround3_relu_not_inplace,
    "deadend1-no-grad": deadend1_no_grad,
    "deadend2-data": deadend2_data,
    "control-no-inplace": control_no_inplace,
}
