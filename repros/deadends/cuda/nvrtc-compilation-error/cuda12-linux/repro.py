"""Reproducer: "RuntimeError: NVRTC compilation failed"
(deadends/cuda/nvrtc-compilation-error/cuda12-linux).

A CUDA kernel compiled at runtime by NVRTC (no nvcc, no toolkit: torch ships the library),
the two ways torch offers: ``torch.cuda._compile_kernel`` (raw NVRTC on a kernel's source,
torch 2.8 and later; its wording "Kernel compilation failed", graded reworded) and the
jiterator (``torch.cuda.jiterator._create_jit_fn``, an elementwise functor NVRTC compiles
on first call; its error is the generated source followed by NVRTC's log). Two causes: a
source NVRTC rejects (an undeclared name) and an architecture it cannot target (sm_20).
Needs one CUDA device: every variant is ``devices: [cuda]`` and raises Unsupported without;
``_compile_kernel`` also needs a CUDA toolkit for its include folder (Unsupported without).
The workarounds change what the record says (CUDA_HOME, empty JIT caches, architecture
flags) and compile the same kernel again; a kernel that compiles is launched and its output
checked.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from reprokit import Unsupported

N = 8  # elements; one block of N threads

ADD_ONE = r"""
extern "C" __global__ void add_one(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + 1.0f;
}
"""

# the same kernel with an undeclared name: NVRTC refuses the source
ADD_ONE_BROKEN = ADD_ONE.replace("a[i] + 1.0f", "a[i] + one")

JIT_ADD_ONE = "template <typename T> T add_one(T x) { return x + T(1); }"
JIT_ADD_ONE_BROKEN = "template <typename T> T add_one(T x) { return x + one; }"

UNSUPPORTED_ARCH = "20"  # sm_20 (Fermi): no NVRTC of CUDA 9 or later targets it


def output_check(a, out):
    """The postcondition: the launched kernel wrote a + 1 everywhere."""
    want = a.float().cpu() + 1
    got = out.float().cpu()
    same = bool(torch.equal(got, want))
    return {
        "kernel_output": {
            "ok": same,
            "detail": "out = a + 1 in %d of %d elements" % (int((got == want).sum()), want.numel()),
        }
    }


def _cuda(precision, compile_kernel=False, jiterator=False):
    if precision != "fp32":
        raise Unsupported("the kernels are written for float: fp32 only")
    if not torch.cuda.is_available():
        raise Unsupported("no CUDA device: NVRTC kernels launch on a GPU")
    if compile_kernel:
        if not hasattr(torch.cuda, "_compile_kernel"):
            raise Unsupported("this torch has no torch.cuda._compile_kernel (torch 2.8 and later)")
        from torch.utils.cpp_extension import CUDA_HOME

        # _compile_kernel adds the toolkit's include folder to NVRTC's options: without a
        # toolkit it stops at an OSError before NVRTC runs (environment, not the behaviour)
        if CUDA_HOME is None:
            raise Unsupported(
                "torch.cuda._compile_kernel needs a CUDA toolkit (CUDA_HOME); none found"
            )
    if jiterator and not hasattr(getattr(torch.cuda, "jiterator", None), "_create_jit_fn"):
        raise Unsupported("this torch has no jiterator (torch 1.12 and later)")


def compile_and_launch(source, compute_capability=None):
    """torch.cuda._compile_kernel(source, "add_one", compute_capability), launched on N
    elements (compute_capability None: the current device's, as torch detects it)."""
    kernel = torch.cuda._compile_kernel(source, "add_one", compute_capability)
    a = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(a)
    kernel(grid=(1, 1, 1), block=(N, 1, 1), args=[a, out, N])
    torch.cuda.synchronize()
    return output_check(a, out)


def jiterate(code):
    """A jiterator functor made from ``code`` and called on N elements."""
    fn = torch.cuda.jiterator._create_jit_fn(code)
    a = torch.arange(N, dtype=torch.float32, device="cuda")
    out = fn(a)
    torch.cuda.synchronize()
    return output_check(a, out)


def device_arch():
    major, minor = torch.cuda.get_device_capability()
    return "%d%d" % (major, minor)


def empty_caches():
    """TORCH_EXTENSIONS_DIR and the jiterator's kernel cache pointed at a fresh empty folder:
    a cleared cache, without deleting anyone's files."""
    folder = tempfile.mkdtemp(prefix="kb-nvrtc-cache-")
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(folder, "torch_extensions")
    os.environ["PYTORCH_KERNEL_CACHE_PATH"] = os.path.join(folder, "kernels")
    return folder


def baseline_source_error(device, precision):
    _cuda(precision, compile_kernel=True)
    return compile_and_launch(ADD_ONE_BROKEN)


def baseline_unsupported_arch(device, precision):
    _cuda(precision, compile_kernel=True)
    return compile_and_launch(ADD_ONE, compute_capability=UNSUPPORTED_ARCH)


def baseline_jiterator_source_error(device, precision):
    _cuda(precision, jiterator=True)
    return jiterate(JIT_ADD_ONE_BROKEN)


def workaround1_cuda_home(device, precision):
    _cuda(precision, compile_kernel=True)
    from torch.utils.cpp_extension import CUDA_HOME

    # the toolkit torch found (the precondition): CUDA_HOME made to name it explicitly
    os.environ["CUDA_HOME"] = CUDA_HOME
    return compile_and_launch(ADD_ONE_BROKEN)


def workaround2_clear_jit_cache(device, precision):
    _cuda(precision, jiterator=True)
    folder = empty_caches()
    try:
        return jiterate(JIT_ADD_ONE_BROKEN)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def workaround3_arch_list_literal(device, precision):
    _cuda(precision, compile_kernel=True)
    os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;8.9"  # the record's example value
    return compile_and_launch(ADD_ONE, compute_capability=UNSUPPORTED_ARCH)


def workaround3_device_arch_sensible(device, precision):
    _cuda(precision, compile_kernel=True)
    return compile_and_launch(ADD_ONE, compute_capability=device_arch())


def control_valid_kernel(device, precision):
    _cuda(precision, compile_kernel=True)
    return compile_and_launch(ADD_ONE)


def control_jiterator_valid(device, precision):
    _cuda(precision, jiterator=True)
    return jiterate(JIT_ADD_ONE)


VARIANTS = {
    "baseline-source-error": baseline_source_error,
    "baseline-unsupported-arch": baseline_unsupported_arch,
    "baseline-jiterator-source-error": baseline_jiterator_source_error,
    "workaround1-cuda-home": workaround1_cuda_home,
    "workaround2-clear-jit-cache": workaround2_clear_jit_cache,
    "workaround3-arch-list-literal": workaround3_arch_list_literal,
    "workaround3-device-arch-sensible": workaround3_device_arch_sensible,
    "control-valid-kernel": control_valid_kernel,
    "control-jiterator-valid": control_jiterator_valid,
}
