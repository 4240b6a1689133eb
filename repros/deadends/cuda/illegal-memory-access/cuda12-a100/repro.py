"""Reproducer: "CUDA error: an illegal memory access was encountered"
(deadends/cuda/illegal-memory-access/cuda12-a100).

A custom GPU gather kernel, written in Triton (which torch's CUDA wheels ship), that trusts its
indices: one index far past the end of the source tensor sends a thread to an address no
allocation covers, and the next synchronisation reports the fault. Each variant applies one
workaround or dead end of https://deadends.dev/cuda/illegal-memory-access/cuda12-a100
(the cuda12-linux record's reproducer, with this record's advice).
Variants that change CUDA's environment (CUDA_LAUNCH_BLOCKING), restart the program or run
under compute-sanitizer run the kernel in a child interpreter (this file, `python repro.py child`): CUDA reads its
environment once, and a fault leaves the process's CUDA context unusable. Every variant needs
a CUDA device (entry.yaml: devices [cuda]).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import torch
from reprokit import Unsupported, time_left

try:
    import triton
    import triton.language as tl

    TRITON_MISSING = None
except Exception as exc:  # CPU builds of torch ship without Triton
    triton = None
    TRITON_MISSING = "%s: %s" % (type(exc).__name__, exc)

N = 1024  # elements of the source tensor
FAR = 1 << 40  # an index 4 TiB past its start: no allocation is there
BAD_AT = 7  # where the bad index sits among the indices
BLOCK = 128
# the longest wait for the child; under the harness, what is left of the job's deadline less a
# margin (reprokit.time_left): a slow child is this run's error, named, not the harness's timeout
CHILD_TIMEOUT_S = 240
# where the tensors live: cuda in every run; the tests set cpu to run the kernel under
# Triton's interpreter (TRITON_INTERPRET=1), which checks it on a machine without a GPU
DEVICE = "cuda"

if triton is not None:

    @triton.jit
    def gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        i = tl.load(idx_ptr + offs, mask=mask, other=0)
        # the bug under test: the index itself is never checked against the source's size
        tl.store(out_ptr + offs, tl.load(x_ptr + i, mask=mask, other=0.0), mask=mask)


class ChildError(RuntimeError):
    """An error raised in the child interpreter, re-raised here with its class and message."""


def require_cuda_and_triton():
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device here: the error is a GPU memory fault")
    if triton is None:
        raise Unsupported("Triton does not import here: %s" % TRITON_MISSING)


def source():
    return torch.arange(float(N), device=DEVICE)


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # where an asynchronous fault is reported


def indices(bad=True):
    idx = torch.arange(256, dtype=torch.int64, device=DEVICE) * 3 % N
    if bad:
        idx[BAD_AT] = FAR
    return idx


def gather(x, idx):
    """out[k] = x[idx[k]] by the Triton kernel (launched, not yet synchronised)."""
    out = torch.empty(idx.numel(), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(idx.numel(), BLOCK),)
    gather_kernel[grid](x, idx, out, idx.numel(), BLOCK=BLOCK)
    return out


def gathered(out, x, idx):
    """The kernel's output equals torch's own indexing of the same source (on the CPU)."""
    want = x.cpu()[idx.cpu()]
    got = out.cpu()
    wrong = int((got != want).sum().item()) if got.shape == want.shape else -1
    return {
        "gathered": {
            "ok": wrong == 0,
            "detail": "%d of %d gathered values differ from x[idx]" % (wrong, want.numel())
            if wrong >= 0
            else "shape %s, expected %s" % (tuple(got.shape), tuple(want.shape)),
        }
    }


def run_gather(bad=True):
    x, idx = source(), indices(bad)
    out = gather(x, idx)
    sync()
    return gathered(out, x, idx)


def in_child(env=None, wrapper=()):
    """The bad gather in a child interpreter (``wrapper`` + python this-file child), with
    ``env`` added: what it reported (where the error arose, its class and message) and the
    child's whole output."""
    reprokit_dir = os.path.dirname(os.path.abspath(sys.modules["reprokit"].__file__))
    path = [reprokit_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **(env or {}))
    command = list(wrapper) + [sys.executable, os.path.abspath(__file__), "child"]
    proc = subprocess.run(
        command, env=full_env, capture_output=True, text=True, timeout=time_left(CHILD_TIMEOUT_S)
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(
            "the child printed no result (exit %s): %s" % (proc.returncode, proc.stderr[-2000:])
        )
    return json.loads(lines[-1][len("RESULT ") :]), proc.stdout + proc.stderr


def raise_child_error(report, how):
    if report.get("error"):
        raise ChildError(
            "%s at %s (%s): %s" % (report["error"], report["located"], how, report["message"])
        )


def child():
    """Run by in_child: the bad gather, reporting whether its error arose at the launch or
    at the synchronisation after it."""
    out = {"located": None}
    step = "setup"
    try:
        x, idx = source(), indices(bad=True)
        step = "launch"
        gather(x, idx)
        step = "sync"
        sync()
    except Exception as exc:
        out.update(located=step, error=type(exc).__name__, message=str(exc))
    print("RESULT " + json.dumps(out))


def baseline_gather_out_of_range_index(device, precision):
    require_cuda_and_triton()
    return run_gather(bad=True)


def workaround1_compute_sanitizer(device, precision):
    require_cuda_and_triton()
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        raise Unsupported("compute-sanitizer is not on PATH here (it comes with a CUDA toolkit)")
    _, output = in_child(wrapper=(tool, "--tool", "memcheck"))
    return {
        "access_reported": {
            "ok": "Invalid __global__ read" in output,
            "detail": "memcheck %s an invalid global read"
            % ("reports" if "Invalid __global__ read" in output else "does not report"),
        },
        "kernel_named": {
            "ok": "gather_kernel" in output,
            "detail": "memcheck %s the kernel gather_kernel"
            % ("names" if "gather_kernel" in output else "does not name"),
        },
    }


def workaround2_check_indices(device, precision):
    require_cuda_and_triton()
    x, idx = source(), indices(bad=True)
    bad = (idx < 0) | (idx >= x.numel())  # the check, on the host side of the launch
    found = bad.nonzero().flatten().tolist()
    keep = idx[~bad]
    out = gather(x, keep)
    sync()
    result = gathered(out, x, keep)
    result["bad_index_found"] = {
        "ok": found == [BAD_AT],
        "detail": "out-of-range positions found: %s (the bad index is at %d)" % (found, BAD_AT),
    }
    return result


def deadend1_launch_blocking(device, precision):
    require_cuda_and_triton()
    report, _ = in_child({"CUDA_LAUNCH_BLOCKING": "1"})
    # the error located (or not) is still the error: the program still fails
    raise_child_error(report, "in a child interpreter with CUDA_LAUNCH_BLOCKING=1")
    return {"gather_completed": {"ok": True, "detail": "the child's gather raised nothing"}}


def deadend2_restart(device, precision):
    require_cuda_and_triton()
    report, _ = in_child()  # the program started again, unchanged, in a fresh process
    raise_child_error(report, "in a fresh interpreter")
    return {"gather_completed": {"ok": True, "detail": "the restarted gather raised nothing"}}


def control_gather_in_range(device, precision):
    require_cuda_and_triton()
    return run_gather(bad=False)


VARIANTS = {
    "baseline-gather-out-of-range-index": baseline_gather_out_of_range_index,
    "workaround1-compute-sanitizer": workaround1_compute_sanitizer,
    "workaround2-check-indices": workaround2_check_indices,
    "deadend1-launch-blocking": deadend1_launch_blocking,
    "deadend2-restart": deadend2_restart,
    "control-gather-in-range": control_gather_in_range,
}

if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    child()
