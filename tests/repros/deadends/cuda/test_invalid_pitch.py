"""deadends/cuda/invalid-pitch/cuda12-linux on the CPU-only torch of the test interpreter:
every variant stops at its precondition; where a CUDA runtime library is at hand (an
environment of the matrix that installs nvidia-cuda-runtime-cu12), the reproducer's bindings
call it (the size_t arguments typed) and its check raises the runtime's own words for error
12, which the entry's signature must match; the postcondition fails on rows that differ."""

from __future__ import annotations

import ctypes
import glob
import os
import re

import pytest
import yaml

from tests.inenv.test_postconditions import failed, load
from tests.paths import REPO

ENTRY = "deadends/cuda/invalid-pitch/cuda12-linux"


@pytest.fixture
def repro():
    module = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("these tests are about a machine without CUDA")
    return module


def a_cudart(repro) -> ctypes.CDLL:
    # the project's own environments (`.envs`, the harness's default), or HARNESS_ENVS_DIR
    envs = os.environ.get("HARNESS_ENVS_DIR", str(REPO / ".envs"))
    pattern = "/*/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.1[2-9]"
    found = sorted(glob.glob(envs + pattern))
    if not found:
        pytest.skip(f"no libcudart of CUDA 12+ under {envs}")
    lib = ctypes.CDLL(found[0])
    assert [name for name in repro.CALLS if not hasattr(lib, name)] == []
    return repro.bind(lib)


@pytest.mark.torch
def test_every_variant_stops_at_its_precondition_without_cuda(repro) -> None:
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="no CUDA device here"):
            variant("cuda", "fp32")


@pytest.mark.torch
def test_the_check_raises_the_runtimes_words_which_the_signature_matches(repro) -> None:
    lib = a_cudart(repro)
    signature = yaml.safe_load((REPO / "repros" / ENTRY / "entry.yaml").read_text())["signature"]
    with pytest.raises(repro.CudaError) as raised:
        repro.check(lib, 12, "cudaMemcpy2D")
    assert re.search(signature["message"], str(raised.value))
    # the bound calls really reach the runtime: no driver here, and it says so
    no_driver = "cudaErrorInsufficientDriver|cudaErrorNoDevice"
    code = lib.cudaMemcpy2D(None, 252, None, 256, 256, 2, repro.D2D)
    with pytest.raises(repro.CudaError, match=no_driver):
        repro.check(lib, code, "cudaMemcpy2D")
    ptr, pitch = ctypes.c_void_p(), ctypes.c_size_t()
    code = lib.cudaMallocPitch(ctypes.byref(ptr), ctypes.byref(pitch), 256, 2)
    with pytest.raises(repro.CudaError, match=no_driver):
        repro.check(lib, code, "cudaMallocPitch")
    value = ctypes.c_int()
    code = lib.cudaDeviceGetAttribute(ctypes.byref(value), repro.MAX_PITCH_ATTR, 0)
    with pytest.raises(repro.CudaError, match=no_driver):
        repro.check(lib, code, "cudaDeviceGetAttribute")


@pytest.mark.torch
def test_rows_intact_fails_for_rows_from_the_wrong_place(repro) -> None:
    import torch

    sent = [torch.arange(8, dtype=torch.uint8), torch.arange(8, 16, dtype=torch.uint8)]
    flat = torch.cat(sent)
    assert failed(repro.rows_intact(repro.row_major(flat, 8), sent)) == set()
    shifted = torch.cat([sent[0], torch.zeros(4, dtype=torch.uint8), sent[1]])  # a padded pitch
    assert failed(repro.rows_intact(repro.row_major(shifted, 8), sent)) == {"rows_intact"}
    assert failed(repro.rows_intact(sent[:1], sent)) == {"rows_intact"}
