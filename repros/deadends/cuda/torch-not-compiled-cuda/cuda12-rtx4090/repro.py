"""Reproducer: "AssertionError: Torch not compiled with CUDA enabled"
(deadends/cuda/torch-not-compiled-cuda/cuda12-rtx4090).

A program asks a CPU-only torch build for a CUDA tensor. Every cell of the cpu profile is such
a build, so the baseline is the documented situation itself, not a twin. Each variant applies
one workaround or dead end of https://deadends.dev/cuda/torch-not-compiled-cuda/cuda12-rtx4090;
the reinstall (workaround 1) and the separate CUDA install (dead end 1) change what is
installed and are done by the harness (entry.yaml `requires`), so their functions run the
baseline's program in the environment they describe.
"""

from __future__ import annotations

import os

import torch
from reprokit import Unsupported


def cpu_only_build():
    """Unsupported unless this is a torch built without CUDA (the documented situation)."""
    if torch.version.cuda is not None or torch.backends.cuda.is_built():
        raise Unsupported(
            "this torch is a CUDA build (CUDA %s): the error is about a build without CUDA"
            % torch.version.cuda
        )


def placed(tensor, wanted):
    return {
        "tensor_on_requested_device": {
            "ok": tensor.device.type == wanted,
            "detail": "asked for %s, the tensor is on %s" % (wanted, tensor.device),
        }
    }


def to_gpu(precision):
    """The program of the report: a tensor moved to the GPU with .cuda()."""
    if precision != "fp32":
        raise Unsupported("the build's CUDA support does not depend on precision: fp32 only")
    cpu_only_build()
    return placed(torch.arange(6.0).cuda(), "cuda")


def baseline_cuda_tensor(device, precision):
    return to_gpu(precision)


def workaround1_reinstall_cu121_build(device, precision):
    # the cu121 build is installed by the harness (entry.yaml requires)
    return to_gpu(precision)


def chosen_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def workaround2_is_available_literal(device, precision):
    if precision != "fp32":
        raise Unsupported("the build's CUDA support does not depend on precision: fp32 only")
    cpu_only_build()
    return placed(torch.arange(6.0).to(chosen_device()), "cuda")


def guarded_sum(target, expected=55.0):
    """sum of squares of 0..5 computed on ``target``, compared with ``expected``."""
    x = torch.arange(6.0, device=target)
    got = float((x * x).sum())
    return {
        "result_correct": {
            "ok": got == expected,
            "detail": "sum of squares of 0..5 on %s: %s (expected %s)" % (target, got, expected),
        }
    }


def workaround2_is_available_guard(device, precision):
    if precision != "fp32":
        raise Unsupported("the build's CUDA support does not depend on precision: fp32 only")
    cpu_only_build()
    return guarded_sum(chosen_device())


def deadend1_cuda_toolkit_installed(device, precision):
    # the CUDA runtime is installed by the harness (entry.yaml requires)
    return to_gpu(precision)


def deadend2_set_cuda_home(device, precision):
    saved = {k: os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")}
    os.environ["CUDA_HOME"] = os.environ["CUDA_PATH"] = "/usr/local/cuda"
    try:
        return to_gpu(precision)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def control_cpu_tensor(device, precision):
    if precision != "fp32":
        raise Unsupported("the build's CUDA support does not depend on precision: fp32 only")
    cpu_only_build()
    return placed(torch.arange(6.0).cpu(), "cpu")


VARIANTS = {
    "baseline-cuda-tensor": baseline_cuda_tensor,
    "workaround1-reinstall-cu121-build": workaround1_reinstall_cu121_build,
    "workaround2-is-available-literal": workaround2_is_available_literal,
    "workaround2-is-available-guard": workaround2_is_available_guard,
    "deadend1-cuda-toolkit-installed": deadend1_cuda_toolkit_installed,
    "deadend2-set-cuda-home": deadend2_set_cuda_home,
    "control-cpu-tensor": control_cpu_tensor,
}
