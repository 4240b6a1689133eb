"""deadends/cuda/illegal-memory-access/cuda12-a100 on the CPU-only torch of the test
interpreter: every variant stops at its precondition, the dead ends' child interpreter really
runs and its error comes back raised, and the gather kernel runs under Triton's interpreter
where Triton is installed."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/illegal-memory-access/cuda12-a100"


@pytest.fixture
def repro(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when the kernel is decorated
    module = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("these tests are about a machine without CUDA")
    return module


@pytest.mark.torch
def test_every_variant_stops_at_its_precondition_without_cuda(repro) -> None:
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="no CUDA device here"):
            variant("cuda", "fp32")


@pytest.mark.torch
@pytest.mark.parametrize(
    "name, how",
    [("deadend1-launch-blocking", "CUDA_LAUNCH_BLOCKING=1"), ("deadend2-restart", "fresh")],
)
def test_a_dead_end_raises_its_childs_error(repro, monkeypatch, name, how) -> None:
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    # the CPU build refuses the child's cuda tensors: that error comes back, named
    with pytest.raises(repro.ChildError, match=f"at setup.*{how}.*not compiled with CUDA"):
        repro.VARIANTS[name]("cuda", "fp32")


@pytest.mark.torch
def test_the_kernel_gathers_under_the_triton_interpreter(repro, monkeypatch) -> None:
    pytest.importorskip("triton", reason="Triton is not installed in the test interpreter")
    monkeypatch.setattr(repro, "DEVICE", "cpu")
    monkeypatch.setattr(repro, "require_cuda_and_triton", lambda: None)
    assert failed(repro.control_gather_in_range("cuda", "fp32")) == set()
    monkeypatch.setattr(repro, "FAR", 5)  # an index in range: the check finds nothing
    assert failed(repro.workaround2_check_indices("cuda", "fp32")) == {"bad_index_found"}
