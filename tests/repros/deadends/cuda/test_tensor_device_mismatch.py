"""deadends/cuda/tensor-device-mismatch/cuda12-linux: each postcondition shown able to fail on
the real torch of the test interpreter, and the CPU twin (meta parameters) refusing the mix."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/tensor-device-mismatch/cuda12-linux"


@pytest.mark.torch
def test_params_trained_fails_when_a_parameter_is_frozen() -> None:
    m = load(ENTRY)
    import torch

    torch.manual_seed(0)
    model = m.Net()
    model.head.bias.requires_grad_(False)  # never updated by the optimiser
    assert failed(m.train(model, m.batches())) == {"params_trained"}


@pytest.mark.torch
def test_loss_finite_fails_on_nan_weights() -> None:
    m = load(ENTRY)
    import torch

    torch.manual_seed(0)
    model = m.Net()
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    assert "loss_finite" in failed(m.train(model, m.batches()))


@pytest.mark.torch
def test_the_twin_refuses_meta_parameters_with_cpu_input() -> None:
    m = load(ENTRY)
    assert failed(m.control_all_on_one_device("cpu", "fp32")) == set()
    with pytest.raises(RuntimeError, match="not on the expected device"):
        m.baseline_input_on_cpu("cpu", "fp32")
