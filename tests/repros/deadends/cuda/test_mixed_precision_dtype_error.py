"""The postconditions of deadends/cuda/mixed-precision-dtype-error/cuda12-a100 shown able to
fail on the real torch of the test interpreter: the reproducer's own train() and checks(),
given a model or a training that breaks what each one checks."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/mixed-precision-dtype-error/cuda12-a100"


@pytest.fixture
def repro():
    return load(ENTRY)


@pytest.mark.torch
def test_the_baseline_raises_the_dtype_check_on_cpu(repro) -> None:
    with pytest.raises(RuntimeError, match="dtype|scalar type"):
        repro.baseline_half_model_float_batch("cpu", "fp16")


@pytest.mark.torch
def test_a_float16_loss_overflows_on_the_reproducers_own_targets(repro) -> None:
    """Dead end 1's documented reason: the same model, data and steps, everything in float16,
    and loss_finite fails (each squared error is past float16's largest value); in float32,
    or with the float16 model's loss computed in float32, every postcondition holds."""
    import torch

    pure_half = repro.checks(repro.train("cpu", torch.float16, torch.float16))
    assert failed(pure_half) == {"loss_finite"}
    assert "inf" in pure_half["loss_finite"]["detail"]
    assert failed(repro.checks(repro.train("cpu", torch.float32, torch.float32), False)) == set()
    loss_in_float32 = repro.train("cpu", torch.float16, torch.float16, loss_dtype=torch.float32)
    assert failed(repro.checks(loss_in_float32)) == set()


@pytest.mark.torch
def test_dead_end_1_fails_as_documented_where_the_control_passes(repro) -> None:
    assert failed(repro.deadend1_cast_everything_half("cpu", "fp16")) == {"loss_finite"}
    assert failed(repro.control_float32("cpu", "fp16")) == set()


@pytest.mark.torch
def test_loss_and_grads_fail_when_float16_overflows(repro, monkeypatch) -> None:
    import torch

    class Overflowing(repro.Net):
        def forward(self, x):
            return super().forward(x) * 1e5  # past float16's largest value (65504)

    monkeypatch.setattr(repro, "Net", Overflowing)
    checks = repro.checks(repro.train("cpu", torch.float16, torch.float16))
    assert {"loss_finite", "grads_finite"} <= failed(checks)


@pytest.mark.torch
def test_params_moved_fails_when_a_layer_gets_no_gradient(repro, monkeypatch) -> None:
    import torch

    class Cut(repro.Net):
        def forward(self, x):
            return self.head(torch.relu(self.body(x)) * 0)  # body's gradients are all zero

    monkeypatch.setattr(repro, "Net", Cut)
    checks = repro.checks(repro.train("cpu", torch.float32, torch.float32), half_forward=False)
    assert failed(checks) == {"params_moved"}


@pytest.mark.torch
def test_forward_in_half_fails_for_a_float32_forward(repro) -> None:
    import torch

    checks = repro.checks(repro.train("cpu", torch.float32, torch.float32))
    assert failed(checks) == {"forward_in_half"}


@pytest.mark.torch
def test_other_precisions_are_unsupported(repro) -> None:
    with pytest.raises(repro.Unsupported, match="fp16 only"):
        repro.control_float32("cpu", "bf16")
