"""Reproducer: "CUDA error: profiler not initialized (cudaErrorProfilerNotInitialized)"
(deadends/cuda/profiler-not-initialized/cuda12-linux).

torch.cuda.profiler.start()/stop() call cudaProfilerStart/cudaProfilerStop, the calls that
delimit a region for a profiler (nsys, ncu) that launched the process. Here none did: the
record's dead end 1 says the calls then fail with the documented error. CUDA cells only;
the workarounds (kernel settings, privileges, launching under nsys) are not scripts (the
triage row says why).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported


def needs_profiler_api(precision):
    if precision != "fp32":
        raise Unsupported("the profiler API does not depend on precision: fp32 only")
    if not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: the profiler calls are CUDA's")
    from torch.cuda import profiler

    return profiler


def product():
    a = torch.arange(16.0, device="cuda").reshape(4, 4)
    got = float((a @ a).sum())
    want = float((torch.arange(16.0).reshape(4, 4) @ torch.arange(16.0).reshape(4, 4)).sum())
    return {
        "work_correct": {
            "ok": got == want,
            "detail": "sum of a @ a: %s (expected %s)" % (got, want),
        }
    }


def start_stop(precision):
    profiler = needs_profiler_api(precision)
    profiler.start()
    checks = product()
    profiler.stop()
    return checks


def baseline_start_stop_unattached(device, precision):
    return start_stop(precision)


def baseline_stop_without_start(device, precision):
    profiler = needs_profiler_api(precision)
    profiler.stop()
    return product()


def deadend1_start_stop_unattached(device, precision):
    return start_stop(precision)


def control_no_profiler_calls(device, precision):
    needs_profiler_api(precision)
    return product()


VARIANTS = {
    "baseline-start-stop-unattached": baseline_start_stop_unattached,
    "baseline-stop-without-start": baseline_stop_without_start,
    "deadend1-start-stop-unattached": deadend1_start_stop_unattached,
    "control-no-profiler-calls": control_no_profiler_calls,
}
