"""Reproducer: "RuntimeError: CUDA lazy loading is not enabled"
(deadends/cuda/cuda-lazy-loading/cuda12-rtx4090).

CUDA_MODULE_LOADING tells the CUDA driver whether to load every kernel of every library when
a process makes its first context (EAGER) or each kernel when it is first launched (LAZY);
the driver reads it when CUDA starts, so every variant runs INIT_SCRIPT in a fresh
interpreter with the environment its advice gives ("export CUDA_MODULE_LOADING=LAZY" before
"python train.py"). The script starts CUDA, runs a matmul and a convolution, and reports the
warnings issued, the loading mode in effect afterwards (torch sets LAZY itself where the
variable is unset) and the device memory in use. Each variant applies one workaround or dead
end of https://deadends.dev/cuda/cuda-lazy-loading/cuda12-rtx4090. No CPU twin: a process
without CUDA loads no CUDA modules (the script runs on the CPU all the same; the tests use it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from reprokit import Unsupported, time_left

VARIABLE = "CUDA_MODULE_LOADING"
MEMORY_SLACK_MIB = 256  # what other work on the device may move the whole device's use by

# "python train.py": CUDA started, a matmul and a conv2d run; its report (JSON, last line):
# the warnings, the loading mode after start, and the device memory in use (MiB): the whole
# device's (mem_get_info) and, where NVML lists it, this process's own (other jobs on the
# same GPU do not move that one).
INIT_SCRIPT = r"""
import ctypes, json, os, sys, warnings
device = sys.argv[1]


def own_mib():
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None

        class Proc(ctypes.Structure):
            _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                        ("gpu_instance", ctypes.c_uint), ("compute_instance", ctypes.c_uint)]

        handle = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
            return None
        count, procs = ctypes.c_uint(256), (Proc * 256)()
        listing = getattr(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", None)
        if listing is None:
            listing = nvml.nvmlDeviceGetComputeRunningProcesses_v2
        if listing(handle, ctypes.byref(count), procs) != 0:
            return None
        for proc in procs[:count.value]:
            if proc.pid == os.getpid() and proc.used < 2 ** 50:  # not "not available"
                return proc.used / 2.0 ** 20
    except Exception:
        return None
    return None

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
    from torch.nn import functional as F
    a = torch.randn(256, 256, device=device)
    b = (a @ a).sum()
    c = F.conv2d(torch.randn(2, 3, 16, 16, device=device), torch.randn(4, 3, 3, 3, device=device))
    used = own = None
    if device == "cuda":
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        used, own = (total - free) / 2.0 ** 20, own_mib()
    float(b + c.sum())
# torch sets the variable with C setenv, which os.environ (read at start) does not see
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
mode = libc.getenv(b"CUDA_MODULE_LOADING")
print(json.dumps({
    "warnings": ["%s: %s" % (w.category.__name__, w.message) for w in caught],
    "mode": mode.decode() if mode else None,
    "used_mib": used,
    "own_mib": own,
}))
"""


def need_cuda(device):
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: module loading is the CUDA driver's")


def init_script(device, env=None, rc_file=None) -> dict:
    """INIT_SCRIPT in a fresh interpreter, CUDA_MODULE_LOADING removed from the environment
    and then ``env`` added; or, with ``rc_file``, started by a bash that sources that file
    first (a shell start-up file): its JSON report."""
    full = {k: v for k, v in os.environ.items() if k != VARIABLE}
    full.update(env or {})
    command = [sys.executable, "-c", INIT_SCRIPT, device]
    if rc_file is not None:
        bash = shutil.which("bash")
        if bash is None:
            raise Unsupported("no bash here to source a start-up file")
        command = [bash, "-c", 'source "$0" && exec "$@"', rc_file] + command
    done = subprocess.run(command, env=full, capture_output=True, text=True, timeout=time_left(300))
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            "the script exited %d: %s" % (done.returncode, done.stderr.strip()[-2000:])
        )
    return json.loads(lines[-1])


def lazy_checks(got) -> dict:
    """Postconditions of one report: no lazy-loading warning, LAZY in effect."""
    warned = [w for w in got["warnings"] if "lazy" in w.lower()]
    return {
        "no_lazy_loading_warning": {
            "ok": not warned,
            "detail": "%d warnings, about lazy loading: %s" % (len(got["warnings"]), warned),
        },
        "lazy_loading_in_effect": {
            "ok": got["mode"] == "LAZY",
            "detail": "%s=%r after CUDA started" % (VARIABLE, got["mode"]),
        },
    }


def memory_check(got, lazy) -> dict:
    """Postcondition: the run's device memory is within MEMORY_SLACK_MIB of a LAZY run's:
    each process's own (NVML) where both reports have it, else the whole device's."""
    key = "own_mib" if got.get("own_mib") and lazy.get("own_mib") else "used_mib"
    mine, theirs = got.get(key), lazy.get(key)
    ok = mine is not None and theirs is not None and mine <= theirs + MEMORY_SLACK_MIB
    return {
        "memory_as_lazy": {
            "ok": ok,
            "detail": "%s MiB in use, against %s MiB with %s=LAZY (%s; slack %d MiB)"
            % (
                mine,
                theirs,
                VARIABLE,
                "this process's, NVML" if key == "own_mib" else "the whole device's",
                MEMORY_SLACK_MIB,
            ),
        }
    }


def fp32_only(precision):
    if precision != "fp32":
        raise Unsupported("module loading does not depend on precision: fp32 only")


def baseline_variable_unset(device, precision):
    need_cuda(device)
    fp32_only(precision)
    return lazy_checks(init_script(device))


def workaround1_export_lazy(device, precision):
    need_cuda(device)
    fp32_only(precision)
    return lazy_checks(init_script(device, {VARIABLE: "LAZY"}))


def workaround2_startup_file(device, precision):
    need_cuda(device)
    fp32_only(precision)
    folder = tempfile.mkdtemp(prefix="kb-lazy-")
    try:
        rc = os.path.join(folder, ".bashrc")
        with open(rc, "w") as f:
            f.write("export %s=LAZY\n" % VARIABLE)  # the line the record adds
        return lazy_checks(init_script(device, rc_file=rc))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def deadend1_export_eager(device, precision):
    need_cuda(device)
    fp32_only(precision)
    got = init_script(device, {VARIABLE: "EAGER"})
    checks = lazy_checks(got)
    checks.update(memory_check(got, init_script(device, {VARIABLE: "LAZY"})))
    return checks


def deadend2_ignore_warning(device, precision):
    need_cuda(device)
    fp32_only(precision)
    # the variable left unset and the warning ignored: the record says memory is wasted
    got = init_script(device)
    return memory_check(got, init_script(device, {VARIABLE: "LAZY"}))


def control_cuda_starts(device, precision):
    need_cuda(device)
    fp32_only(precision)
    # the program as the workaround leaves it, judged by what it computes: it must start
    return started(init_script(device, {VARIABLE: "LAZY"}))


def started(got) -> dict:
    """Postcondition of a report: CUDA started (device memory in use after the work)."""
    return {
        "cuda_started": {
            "ok": got["used_mib"] is not None and got["used_mib"] > 0,
            "detail": "%s MiB in use after the matmul and conv2d" % got["used_mib"],
        }
    }


VARIANTS = {
    "baseline-variable-unset": baseline_variable_unset,
    "workaround1-export-lazy": workaround1_export_lazy,
    "workaround2-startup-file": workaround2_startup_file,
    "deadend1-export-eager": deadend1_export_eager,
    "deadend2-ignore-warning": deadend2_ignore_warning,
    "control-cuda-starts": control_cuda_starts,
}
