"""deadends/cuda/invalid-device-ordinal/cuda12-linux on the CPU-only torch of the test
interpreter: every variant stops at its precondition (no CUDA device), the child interpreter
that the CUDA_VISIBLE_DEVICES variants use really runs and reports the child's error, and each
postcondition fails on a placement that breaks it."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/invalid-device-ordinal/cuda12-linux"


@pytest.fixture
def repro():
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
def test_the_child_interpreter_reports_its_error(repro) -> None:
    # the CPU build refuses any CUDA placement: the child's error comes back with its class
    with pytest.raises(repro.ChildError, match=r"CUDA_VISIBLE_DEVICES=0.*not compiled with CUDA"):
        repro.in_child(0, "0")


@pytest.mark.torch
def test_on_requested_device_fails_where_the_tensor_went_elsewhere(repro) -> None:
    import torch

    t = torch.arange(4.0)
    got = {"device": str(t.device), "sum": float(t.sum().item())}
    assert failed(repro.checks(got, "cuda:0")) == {"on_requested_device"}


@pytest.mark.torch
def test_values_intact_fails_for_other_values(repro) -> None:
    import torch

    t = torch.arange(4.0) * 2
    assert failed(repro.checks({"device": "cpu", "sum": float(t.sum())}, "cpu")) == {
        "values_intact"
    }
