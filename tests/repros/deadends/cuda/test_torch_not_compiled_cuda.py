"""deadends/cuda/torch-not-compiled-cuda/cuda12-rtx4090: each postcondition shown able to fail
on the real torch of the test interpreter (a CPU-only build, the documented situation)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/torch-not-compiled-cuda/cuda12-rtx4090"


@pytest.mark.torch
def test_tensor_on_requested_device_fails_off_the_asked_device() -> None:
    m = load(ENTRY)
    import torch

    assert failed(m.placed(torch.zeros(2), "cuda")) == {"tensor_on_requested_device"}
    assert failed(m.placed(torch.zeros(2), "cpu")) == set()


@pytest.mark.torch
def test_result_correct_fails_on_a_wrong_result() -> None:
    m = load(ENTRY)
    assert failed(m.guarded_sum("cpu", expected=54.0)) == {"result_correct"}
    assert failed(m.guarded_sum("cpu")) == set()


@pytest.mark.torch
def test_baseline_raises_the_documented_error_on_a_cpu_build() -> None:
    m = load(ENTRY)
    import torch

    if torch.version.cuda is not None:
        pytest.skip("the test interpreter's torch is a CUDA build")
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        m.baseline_cuda_tensor("cpu", "fp32")
    with pytest.raises(m.Unsupported):
        m.baseline_cuda_tensor("cpu", "fp16")
