"""Reproducer: "CUDA error: invalid device ordinal (cudaErrorInvalidDevice)"
(deadends/cuda/invalid-device-ordinal/cuda12-linux).

A script written for one more GPU than the machine has: it moves a tensor to
cuda:<device_count()>, the first ordinal past the last device, and CUDA refuses the ordinal.
Each variant applies one workaround or dead end of
https://deadends.dev/cuda/invalid-device-ordinal/cuda12-linux. The CUDA_VISIBLE_DEVICES
variants run their CUDA part in a child interpreter started with the variable set: CUDA reads
it once, when it starts, and the harness's process may have started CUDA already. Every
variant needs a CUDA device (entry.yaml: devices [cuda]).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import torch
from reprokit import Unsupported, time_left

CHILD_TIMEOUT_S = 120  # under the harness: what is left of the job's deadline (time_left)


class ChildError(RuntimeError):
    """An error raised in the child interpreter, re-raised here with its class and message
    (a RuntimeError, as torch's CUDA errors are)."""


def require_cuda():
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device here: the error is about CUDA device ordinals")
    return torch.cuda.device_count()


def place(ordinal):
    """A tensor moved to cuda:<ordinal> and summed there: where it went and what it holds."""
    t = torch.arange(4.0).to(torch.device("cuda", ordinal))
    return {"device": str(t.device), "sum": float(t.sum().item())}


def checks(got, wanted):
    """The tensor landed on ``wanted`` and its values survived the move (0+1+2+3)."""
    return {
        "on_requested_device": {
            "ok": got["device"] == wanted,
            "detail": "the tensor is on %s; asked for %s" % (got["device"], wanted),
        },
        "values_intact": {
            "ok": got["sum"] == 6.0,
            "detail": "sum of arange(4) on the device: %s (must be 6.0)" % got["sum"],
        },
    }


def in_child(ordinal, visible):
    """place(ordinal) in a fresh interpreter with CUDA_VISIBLE_DEVICES=``visible``; its
    result, or its error re-raised as ChildError. Also returns what the child counted."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible)
    code = (
        "import json, torch\n"
        "out = {'count': torch.cuda.device_count()}\n"
        "try:\n"
        "    t = torch.arange(4.0).to(torch.device('cuda', %d))\n"
        "    out.update(device=str(t.device), sum=float(t.sum().item()))\n"
        "except Exception as exc:\n"
        "    out.update(error=type(exc).__name__, message=str(exc))\n"
        "print('RESULT ' + json.dumps(out))\n"
    ) % ordinal
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=time_left(CHILD_TIMEOUT_S),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(
            "the child interpreter printed no result (exit %s): %s"
            % (proc.returncode, proc.stderr[-2000:])
        )
    out = json.loads(lines[-1][len("RESULT ") :])
    if "error" in out:
        raise ChildError(
            "%s (in a child with CUDA_VISIBLE_DEVICES=%s, %d device(s) visible): %s"
            % (out["error"], visible, out["count"], out["message"])
        )
    return out


def baseline_ordinal_past_last(device, precision):
    n = require_cuda()
    return checks(place(n), "cuda:%d" % n)


def workaround1_list_with_nvidia_smi(device, precision):
    n = require_cuda()
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise Unsupported("nvidia-smi is not on PATH here")
    listed = subprocess.run(
        [smi, "-L"], stdout=subprocess.PIPE, text=True, timeout=time_left(60)
    ).stdout
    gpus = [ln for ln in listed.splitlines() if ln.startswith("GPU ")]
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None or len(gpus) != n:
        raise Unsupported(
            "nvidia-smi lists %d GPU(s), CUDA sees %d (CUDA_VISIBLE_DEVICES=%r): its numbering "
            "is not CUDA's here" % (len(gpus), n, os.environ.get("CUDA_VISIBLE_DEVICES"))
        )
    # the script's wanted ordinal (n, past the end), brought into [0, GPUs listed - 1]
    ordinal = min(n, len(gpus) - 1)
    return checks(place(ordinal), "cuda:%d" % ordinal)


def workaround2_visible_devices_remapped(device, precision):
    require_cuda()
    # the first GPU made visible alone, then used by its remapped ordinal 0
    return checks(in_child(0, "0"), "cuda:0")


def workaround3_clamp_to_device_count(device, precision):
    n = require_cuda()
    ordinal = min(n, torch.cuda.device_count() - 1)
    return checks(place(ordinal), "cuda:%d" % ordinal)


def deadend1_visible_devices_literal(device, precision):
    n = require_cuda()
    # CUDA_VISIBLE_DEVICES set to the number the script asks for, the script unchanged
    return checks(in_child(n, str(n)), "cuda:%d" % n)


def deadend1_visible_devices_listing(device, precision):
    n = require_cuda()
    # every number up to the one asked for listed as visible, the script unchanged
    visible = ",".join(str(i) for i in range(n + 1))
    return checks(in_child(n, visible), "cuda:%d" % n)


def control_ordinal_zero(device, precision):
    require_cuda()
    return checks(place(0), "cuda:0")


VARIANTS = {
    "baseline-ordinal-past-last": baseline_ordinal_past_last,
    "workaround1-list-with-nvidia-smi": workaround1_list_with_nvidia_smi,
    "workaround2-visible-devices-remapped": workaround2_visible_devices_remapped,
    "workaround3-clamp-to-device-count": workaround3_clamp_to_device_count,
    "deadend1-visible-devices-literal": deadend1_visible_devices_literal,
    "deadend1-visible-devices-listing": deadend1_visible_devices_listing,
    "control-ordinal-zero": control_ordinal_zero,
}
