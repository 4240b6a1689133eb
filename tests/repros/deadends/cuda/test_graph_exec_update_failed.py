"""deadends/cuda/graph-exec-update-failed/cuda12-linux on the CPU-only torch of the test
interpreter: every variant stops at its precondition; where a CUDA runtime library is at hand
(an environment of the matrix that installs nvidia-cuda-runtime-cu12), the reproducer's check
raises the runtime's own words for error 910, which the entry's signature must match; the
postcondition fails on tensors that hold other values."""

from __future__ import annotations

import ctypes
import glob
import os
import re

import pytest
import yaml

from tests.inenv.test_postconditions import failed, load
from tests.paths import REPO

ENTRY = "deadends/cuda/graph-exec-update-failed/cuda12-linux"


@pytest.fixture
def repro():
    module = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("these tests are about a machine without CUDA")
    return module


def a_cudart() -> ctypes.CDLL:
    # the project's own environments (`.envs`, the harness's default), or HARNESS_ENVS_DIR
    envs = os.environ.get("HARNESS_ENVS_DIR", str(REPO / ".envs"))
    found = sorted(
        glob.glob(
            envs + "/*/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.1[2-9]"
        )
    )
    if not found:
        pytest.skip(f"no libcudart of CUDA 12+ under {envs}")
    return ctypes.CDLL(found[0])


@pytest.mark.torch
def test_every_variant_stops_at_its_precondition_without_cuda(repro) -> None:
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="no CUDA device here"):
            variant("cuda", "fp32")


@pytest.mark.torch
def test_the_check_raises_the_runtimes_words_which_the_signature_matches(repro) -> None:
    lib = a_cudart()
    assert [name for name in repro.CALLS if not hasattr(lib, name)] == []
    repro.bind(lib)
    signature = yaml.safe_load((REPO / "repros" / ENTRY / "entry.yaml").read_text())["signature"]
    repro.check(lib, 0, "cudaSuccess")  # no error, nothing raised
    with pytest.raises(repro.CudaError) as raised:
        repro.check(lib, 910, "cudaGraphExecUpdate")
    assert re.search(signature["message"], str(raised.value))
    # real calls through the same bindings, with the arguments the variants pass (their types
    # converted by ctypes as on the GPU): no driver here, and the runtime says so
    no_driver = "cudaErrorInsufficientDriver|cudaErrorNoDevice"
    graph, node, exe = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    params = repro.MemsetParams(0, 0, 3, 4, repro.ELEMENTS, 1)
    deps = (ctypes.c_void_p * 1)(None)
    info = (ctypes.c_char * 64)()
    calls = {
        "cudaGraphCreate": lib.cudaGraphCreate(ctypes.byref(graph), 0),
        "cudaGraphAddMemsetNode": lib.cudaGraphAddMemsetNode(
            ctypes.byref(node), graph, deps, 1, ctypes.byref(params)
        ),
        "cudaGraphInstantiateWithFlags": lib.cudaGraphInstantiateWithFlags(
            ctypes.byref(exe), graph, ctypes.c_ulonglong(0)
        ),
        "cudaGraphExecUpdate": lib.cudaGraphExecUpdate(exe, graph, ctypes.byref(info)),
        "cudaGraphExecMemsetNodeSetParams": lib.cudaGraphExecMemsetNodeSetParams(
            exe, node, ctypes.byref(params)
        ),
        "cudaGraphLaunch": lib.cudaGraphLaunch(exe, None),
    }
    for call, code in calls.items():
        with pytest.raises(repro.CudaError, match=no_driver):
            repro.check(lib, code, call)


@pytest.mark.torch
def test_memset_params_have_the_runtimes_layout(repro) -> None:
    assert ctypes.sizeof(repro.MemsetParams) == 40  # void*, size_t, 2 x unsigned, 2 x size_t


@pytest.mark.torch
def test_graph_wrote_values_fails_for_other_values(repro) -> None:
    import torch

    ts = [torch.full((4,), 5, dtype=torch.int32), torch.full((4,), 6, dtype=torch.int32)]
    assert failed(repro.wrote(ts, [5, 6])) == set()
    assert failed(repro.wrote(ts, [5, 7])) == {"graph_wrote_values"}
    ts[0][1] = 0  # one element the node did not write
    assert failed(repro.wrote(ts, [5, 6])) == {"graph_wrote_values"}
