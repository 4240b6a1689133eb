"""Reproducer: "RuntimeError: CUDA error: device-side assert triggered"
(deadends/cuda/device-side-assert/cuda12-a100).

A 4-class classifier trained one step on a batch whose labels hold a 4: cross_entropy's
kernel asserts that every target lies in [0, num_classes). On CUDA the assert fires inside
the kernel, and torch raises the documented error at the next call that checks the device;
on the CPU the same bounds check raises IndexError ("Target 4 is out of bounds.") on the host
at once, the CPU twin (entry.yaml: the cpu baseline's own signature). Each variant applies
one workaround or dead end of https://deadends.dev/cuda/device-side-assert/cuda12-a100.
The launch-blocking workaround (=1) and dead end (=0) run TRAIN_SCRIPT in fresh interpreters:
a "python train.py" of their own, with CUDA_LAUNCH_BLOCKING set as the advice says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
from reprokit import Unsupported, finite, moved
from torch import nn
from torch.nn import functional as F

NUM_CLASSES = 4
BAD_LABEL = NUM_CLASSES  # one past the last class: the commonest cause of the assert

# "python train.py": one training step on DEVICE, its labels good or holding BAD_LABEL; it
# reports (JSON, last line of stdout) the stage that raised and the error, or the loss.
# Stages: "loss" (the cross_entropy call, where the bad label is), "backward", "item".
TRAIN_SCRIPT = r"""
import json, sys
import torch
from torch.nn import functional as F
device, labels = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Linear(8, 4).to(device)
x = torch.randn(16, 8, device=device)
y = torch.arange(16, device=device) % 4
if labels == "bad":
    y[5] = 4
out = {"stage": None, "error": None, "loss": None}
stage = "loss"
try:
    loss = F.cross_entropy(model(x), y)
    stage = "backward"
    loss.backward()
    stage = "item"
    out["loss"] = loss.item()
except Exception as exc:
    out["stage"], out["error"] = stage, "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def need_cuda(device):
    """Unsupported unless ``device`` is a usable CUDA device (decided before anything runs)."""
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: the device-side assert is a CUDA kernel's")


def train_script(device, labels, **env):
    """TRAIN_SCRIPT in a fresh interpreter with ``env`` added: its JSON report."""
    full = dict(os.environ)
    full.update(env)
    done = subprocess.run(
        [sys.executable, "-c", TRAIN_SCRIPT, device, labels],
        env=full,
        capture_output=True,  # Python 3.7's, like text=
        text=True,
        timeout=300,
    )
    lines = done.stdout.strip().splitlines()
    # its report counts even where the interpreter then dies tearing down a broken context
    if not lines or not lines[-1].startswith("{"):
        raise RuntimeError(
            "the training script exited %d without its report: %s"
            % (done.returncode, done.stderr.strip()[-2000:])
        )
    return json.loads(lines[-1])


def at_faulty_op(got) -> dict:
    """Postcondition of a TRAIN_SCRIPT report: the error was raised at the loss call."""
    return {
        "error_at_faulty_op": {
            "ok": got["stage"] == "loss",
            "detail": "raised at stage %s (the bad label is in the loss call): %s"
            % (got["stage"], got["error"]),
        }
    }


def batch(device, bad):
    torch.manual_seed(0)
    x = torch.randn(16, 8, device=device)
    y = torch.arange(16, device=device) % NUM_CLASSES
    if bad:
        y[5] = BAD_LABEL
    return x, y


def step(model, x, y):
    """One SGD step: the loss read back on the host (the sync where CUDA reports an assert)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def train(device, precision, bad, heads=NUM_CLASSES, check=None) -> dict:
    """One step on a batch (its labels holding BAD_LABEL if ``bad``), on a head of ``heads``
    outputs, after ``check(labels, heads)`` where given: the loss and whether it trained."""
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    x, y = batch(device, bad)
    torch.manual_seed(1)
    model = nn.Linear(8, heads).to(device)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    if check is not None:
        check(y, heads)
    loss = step(model, x, y)
    return {
        "loss_finite": finite([loss]),
        "params_moved": moved(before, dict(model.named_parameters())),
    }


def check_label_bounds(labels, num_classes):
    # the record's check: every label in [0, num_classes) before the loss
    assert labels.min().item() >= 0, "Negative label: %d" % labels.min().item()
    assert labels.max().item() < num_classes, "Label %d >= num_classes %d" % (
        labels.max().item(),
        num_classes,
    )


def baseline_label_out_of_range_cpu(device, precision):
    return train(device, precision, bad=True)


def baseline_label_out_of_range_cuda(device, precision):
    need_cuda(device)
    return train(device, precision, bad=True)


def workaround1_launch_blocking(device, precision):
    need_cuda(device)
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    # literal: CUDA_LAUNCH_BLOCKING=1 python train.py; the advice is that the traceback then
    # names the operation that asserted (the cross_entropy call) and not a later line
    got = train_script(device, "bad", CUDA_LAUNCH_BLOCKING="1")
    return at_faulty_op(got)


def check_shapes_and_labels(logits, labels, num_classes):
    # the record's check: the head's output dim is num_classes, every label in range
    assert logits.shape[1] == num_classes, "output dim %d != num_classes %d" % (
        logits.shape[1],
        num_classes,
    )
    check_label_bounds(labels, num_classes)


def workaround2_check_shapes_literal(device, precision):
    # literal: the shapes and the label range checked before the loss; the check stops the
    # step with a message that names the label, on the host, before any kernel sees it
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    x, y = batch(device, bad=True)
    model = nn.Linear(8, NUM_CLASSES).to(device)
    try:
        check_shapes_and_labels(model(x), y, NUM_CLASSES)
    except AssertionError as exc:
        x, y = batch(device, bad=False)  # the device still works after the check stopped it
        loss = F.cross_entropy(model(x), y).item()
        return {
            "bad_label_named": {
                "ok": str(BAD_LABEL) in str(exc),
                "detail": "the check raised: %s" % exc,
            },
            "device_usable_after": finite([loss]),
        }
    return {"bad_label_named": {"ok": False, "detail": "the check let the bad label through"}}


def workaround2_check_shapes_sensible(device, precision):
    # sensible: num_classes made to match: the head gets as many outputs as the labels need
    x, y = batch(device, bad=True)
    heads = int(y.max().item()) + 1
    return train(device, precision, bad=True, heads=heads, check=check_label_bounds)


def deadend1_launch_blocking_0(device, precision):
    need_cuda(device)
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    # CUDA_LAUNCH_BLOCKING=0 python train.py, the error caught and ignored: the record says
    # it then surfaces later, at another line than the one that asserted
    got = train_script(device, "bad", CUDA_LAUNCH_BLOCKING="0")
    return at_faulty_op(got)


def deadend2_more_gpu_memory(device, precision):
    need_cuda(device)
    # one card cannot grow: the step run with the cache emptied and most of the card free
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    if free < total / 2:
        raise Unsupported("less than half of the GPU is free (%d of %d bytes)" % (free, total))
    return train(device, precision, bad=True)


def control_labels_in_range(device, precision):
    return train(device, precision, bad=False)


VARIANTS = {
    "baseline-label-out-of-range-cpu": baseline_label_out_of_range_cpu,
    "baseline-label-out-of-range-cuda": baseline_label_out_of_range_cuda,
    "workaround1-launch-blocking": workaround1_launch_blocking,
    "workaround2-check-shapes-literal": workaround2_check_shapes_literal,
    "workaround2-check-shapes-sensible": workaround2_check_shapes_sensible,
    "deadend1-launch-blocking-0": deadend1_launch_blocking_0,
    "deadend2-more-gpu-memory": deadend2_more_gpu_memory,
    "control-labels-in-range": control_labels_in_range,
}
