"""Reproducer: "RuntimeError: CUDA error: misaligned address"
(deadends/cuda/misaligned-address/cuda12-linux).

A custom GPU kernel, written in Triton (which torch's CUDA wheels ship), that reads 4-byte
words from a byte buffer starting one byte past its beginning: every load's address is odd,
the GPU refuses unaligned words, and the next synchronisation reports the fault. Each variant
applies one workaround or dead end of https://deadends.dev/cuda/misaligned-address/cuda12-linux.
Variants that change CUDA's environment (CUDA_LAUNCH_BLOCKING, PYTORCH_NO_CUDA_MEMORY_CACHING)
run the kernel in a child interpreter (this file, `python repro.py child`): CUDA and torch's
allocator read their environment once, and a fault leaves the process's CUDA context unusable.
Every variant needs a CUDA device (entry.yaml: devices [cuda]).
"""

from __future__ import annotations

import json
import os
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

WORDS = 64  # 4-byte words read
ODD = 1  # the byte the words start at: not a multiple of 4
BLOCK = 64
# the longest wait for the child; under the harness, what is left of the job's deadline less a
# margin (reprokit.time_left): a slow child is this run's error, named, not the harness's timeout
CHILD_TIMEOUT_S = 240
# where the tensors live: cuda in every run; the tests set cpu to run the kernel under
# Triton's interpreter (TRITON_INTERPRET=1), which checks it on a machine without a GPU
DEVICE = "cuda"

if triton is not None:

    @triton.jit
    def words_kernel(bytes_ptr, out_ptr, start, n, BLOCK: tl.constexpr, LONG: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        if LONG:  # 64-bit index arithmetic (workaround 2)
            offs = offs.to(tl.int64)
        # the bug under test: a byte address taken as the address of 4-byte words
        words = (bytes_ptr + start).to(tl.pointer_type(tl.int32))
        tl.store(out_ptr + offs, tl.load(words + offs, mask=mask, other=0), mask=mask)


class ChildError(RuntimeError):
    """An error raised in the child interpreter, re-raised here with its class and message."""


def require_cuda_and_triton():
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device here: the error is a GPU memory fault")
    if triton is None:
        raise Unsupported("Triton does not import here: %s" % TRITON_MISSING)


def buffer():
    """4*WORDS + 8 bytes of known values (i mod 251), 16-byte aligned as torch allocates."""
    return (torch.arange(4 * WORDS + 8, device=DEVICE) % 251).to(torch.uint8)


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # where an asynchronous fault is reported


def read_words(buf, start, long=False):
    """The kernel's WORDS int32 words from byte ``start`` of ``buf`` (launched, unsynchronised);
    its index arithmetic in 64 bits where ``long``."""
    out = torch.empty(WORDS, dtype=torch.int32, device=buf.device)
    words_kernel[(1,)](buf, out, start, WORDS, BLOCK=BLOCK, LONG=long)
    return out


def words_read(out, buf, start):
    """The kernel's words equal the same bytes reinterpreted by torch on the CPU."""
    want = buf.cpu()[start : start + 4 * WORDS].clone().view(torch.int32)
    wrong = int((out.cpu() != want).sum().item()) if out.shape == want.shape else -1
    return {
        "words_read": {
            "ok": wrong == 0,
            "detail": "%d of %d words differ from the bytes at %d" % (wrong, WORDS, start)
            if wrong >= 0
            else "shape %s, expected %s" % (tuple(out.shape), tuple(want.shape)),
        }
    }


def run_read(start, long=False):
    buf = buffer()
    out = read_words(buf, start, long)
    sync()
    return words_read(out, buf, start)


def in_child(env):
    """The misaligned read in a child interpreter with ``env`` added: what it reported."""
    reprokit_dir = os.path.dirname(os.path.abspath(sys.modules["reprokit"].__file__))
    path = [reprokit_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **env)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "child"],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=time_left(CHILD_TIMEOUT_S),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(
            "the child printed no result (exit %s): %s" % (proc.returncode, proc.stderr[-2000:])
        )
    return json.loads(lines[-1][len("RESULT ") :])


def raise_child_error(report, how):
    if report.get("error"):
        raise ChildError(
            "%s at %s (%s): %s" % (report["error"], report["located"], how, report["message"])
        )


def child():
    """Run by in_child: the misaligned read, reporting whether its error arose at the launch
    or at the synchronisation after it."""
    out = {"located": None}
    step = "setup"
    try:
        buf = buffer()
        step = "launch"
        read_words(buf, ODD)
        step = "sync"
        sync()
    except Exception as exc:
        out.update(located=step, error=type(exc).__name__, message=str(exc))
    print("RESULT " + json.dumps(out))


def baseline_words_at_odd_byte(device, precision):
    require_cuda_and_triton()
    return run_read(ODD)


def workaround1_launch_blocking(device, precision):
    require_cuda_and_triton()
    report = in_child({"CUDA_LAUNCH_BLOCKING": "1"})
    # the workaround's promise: the exact kernel, i.e. the error raised by the faulting launch
    return {
        "error_at_the_launch": {
            "ok": report["located"] == "launch",
            "detail": "with CUDA_LAUNCH_BLOCKING=1 the error arose at: %s (%s: %s)"
            % (report["located"], report.get("error"), report.get("message", "")[:300]),
        }
    }


def workaround2_long_indices(device, precision):
    require_cuda_and_triton()
    # the kernel's offsets and start computed in 64 bits (torch.long's width), nothing else
    return run_read(ODD, long=True)


def workaround3_check_alignment(device, precision):
    require_cuda_and_triton()
    buf = buffer()
    address = buf.data_ptr() + ODD
    misaligned = address % 4 != 0  # alignof(int32) is 4
    # where the start is misaligned, the bytes copied to a fresh (aligned) buffer first
    source, start = (buf[ODD : ODD + 4 * WORDS].clone(), 0) if misaligned else (buf, ODD)
    out = read_words(source, start)
    sync()
    result = words_read(out, buf, ODD)
    result["misalignment_found"] = {
        "ok": misaligned,
        "detail": "the words' start address %#x is %s4-byte aligned"
        % (address, "not " if misaligned else ""),
    }
    return result


def deadend1_more_memory(device, precision):
    require_cuda_and_triton()
    torch.cuda.set_per_process_memory_fraction(1.0)
    reserve = torch.empty(1 << 28, device=DEVICE)  # 1 GiB more held by the allocator
    try:
        return run_read(ODD)
    finally:
        del reserve


def deadend2_no_caching_allocator(device, precision):
    require_cuda_and_triton()
    report = in_child({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    raise_child_error(report, "in a child with PYTORCH_NO_CUDA_MEMORY_CACHING=1")
    return {"read_completed": {"ok": True, "detail": "the child's read raised nothing"}}


def control_aligned_start(device, precision):
    require_cuda_and_triton()
    return run_read(0)


VARIANTS = {
    "baseline-words-at-odd-byte": baseline_words_at_odd_byte,
    "workaround1-launch-blocking": workaround1_launch_blocking,
    "workaround2-long-indices": workaround2_long_indices,
    "workaround3-check-alignment": workaround3_check_alignment,
    "deadend1-more-memory": deadend1_more_memory,
    "deadend2-no-caching-allocator": deadend2_no_caching_allocator,
    "control-aligned-start": control_aligned_start,
}

if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    child()
