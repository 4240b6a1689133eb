"""Reproducer: "RuntimeError: CUDA error: device-side assert triggered"
(deadends/cuda/device-side-assert/cuda12-linux).

A 4-class classifier trained one step on a batch whose labels hold a 4: cross_entropy's
kernel asserts that every target lies in [0, num_classes). On CUDA the assert fires inside
the kernel, and torch raises the documented error at the next call that checks the device;
on the CPU the same bounds check raises IndexError ("Target 4 is out of bounds.") on the host
at once, the CPU twin (entry.yaml: the cpu baseline's own signature). Each variant applies
one workaround or dead end of https://deadends.dev/cuda/device-side-assert/cuda12-linux.
The dead ends about the sticky CUDA error (a new process, catching and going on) and the
launch-blocking workaround run TRAIN_SCRIPT in fresh interpreters: a "python train.py" of
their own, with the environment the advice names.
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
ASSERT = "device-side assert triggered"

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


def workaround2_check_labels_literal(device, precision):
    # literal: the record's assertions before the loss; they stop the step with a message
    # that names the label, on the host, before any kernel sees it
    try:
        train(device, precision, bad=True, check=check_label_bounds)
    except AssertionError as exc:
        x, y = batch(device, bad=False)  # the device still works after the check stopped it
        loss = F.cross_entropy(nn.Linear(8, NUM_CLASSES).to(device)(x), y).item()
        return {
            "bad_label_named": {
                "ok": str(BAD_LABEL) in str(exc),
                "detail": "the check raised: %s" % exc,
            },
            "device_usable_after": finite([loss]),
        }
    return {"bad_label_named": {"ok": False, "detail": "the check let the bad label through"}}


def workaround2_check_labels_sensible(device, precision):
    # sensible: the check found labels up to BAD_LABEL, so the head gets max label + 1 outputs
    x, y = batch(device, bad=True)
    heads = int(y.max().item()) + 1
    return train(device, precision, bad=True, heads=heads, check=check_label_bounds)


def deadend1_restart_process(device, precision):
    need_cuda(device)
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    first = train_script(device, "bad")  # this process asserts and exits
    again = train_script(device, "good")  # a new process on the same GPU, good labels
    return restarted(first, again)


def restarted(first, again) -> dict:
    """Postconditions of two TRAIN_SCRIPT reports: the first asserted, the second trained."""
    return {
        "first_run_asserted": {
            "ok": first["error"] is not None and ASSERT in first["error"],
            "detail": "the first process: %s" % (first["error"] or "no error"),
        },
        "restarted_run_trains": {
            "ok": again["error"] is None and again["loss"] is not None,
            "detail": "the restarted process: %s" % (again["error"] or "loss %r" % again["loss"]),
        },
    }


def deadend2_catch_and_continue(device, precision):
    need_cuda(device)
    if precision != "fp32":
        raise Unsupported("a label's range does not depend on precision: fp32 only")
    caught = "no error"
    try:
        train(device, precision, bad=True)
    except RuntimeError as exc:
        if ASSERT not in str(exc):
            raise  # not the error this dead end is about: let the harness classify it
        caught = str(exc).splitlines()[0]
    # going on with a good batch in the same process: the record says it fails too
    checks = train(device, precision, bad=False)
    checks["first_step_asserted"] = {"ok": caught != "no error", "detail": caught}
    return checks


def control_labels_in_range(device, precision):
    return train(device, precision, bad=False)


VARIANTS = {
    "baseline-label-out-of-range-cpu": baseline_label_out_of_range_cpu,
    "baseline-label-out-of-range-cuda": baseline_label_out_of_range_cuda,
    "workaround1-launch-blocking": workaround1_launch_blocking,
    "workaround2-check-labels-literal": workaround2_check_labels_literal,
    "workaround2-check-labels-sensible": workaround2_check_labels_sensible,
    "deadend1-restart-process": deadend1_restart_process,
    "deadend2-catch-and-continue": deadend2_catch_and_continue,
    "control-labels-in-range": control_labels_in_range,
}
