"""deadends/python/cuda-out-of-memory/torch2.1-a100-40gb: the training steps every variant runs, shown
on the CPU (the variants themselves need CUDA), each postcondition able to fail."""

from __future__ import annotations

import contextlib
import os

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/python/cuda-out-of-memory/torch2.1-a100-40gb"


@pytest.mark.torch
def test_every_method_of_the_step_runs_and_a_short_step_fails_samples_per_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = load(ENTRY)
    monkeypatch.setattr(m, "BATCH", 64)
    assert failed(m.train_step("cpu", 64, batch=64)) == set()
    assert failed(m.train_step("cpu", 64, micro=2, batch=64)) == set()
    assert failed(m.train_step("cpu", 64, forward=m.checkpointed, batch=64)) == set()
    assert failed(m.train_step("cpu", 64, precision="bf16", batch=64)) == set()
    assert failed(m.train_step("cpu", 32, batch=64)) == {"samples_per_step"}
    # the large model, trained by Adam, at its batch and at batch 1
    width = m.big_width(4 * m.BIG_DEPTH * 32 * 32)
    assert width == 32
    assert failed(m.train_step("cpu", m.BIG_BATCH, width=width, batch=m.BIG_BATCH)) == set()
    assert failed(m.train_step("cpu", 1, width=width, batch=m.BIG_BATCH)) == {"samples_per_step"}


@pytest.mark.torch
def test_ran_in_half_fails_where_autocast_does_not_engage(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load(ENTRY)
    import torch

    monkeypatch.setattr(m, "BATCH", 64)
    assert "ran_in_half" in m.train_step("cpu", 64, precision="bf16", batch=64)
    checks = m.train_step("cpu", 64, precision="bf16", context=contextlib.nullcontext, batch=64)
    assert failed(checks) == {"ran_in_half"}
    # the literal workaround's torch.cuda.amp.autocast() does nothing without CUDA
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning):
            checks = m.train_step(
                "cpu", 64, precision="fp16", context=torch.cuda.amp.autocast, scale=False, batch=64
            )
        assert failed(checks) == {"ran_in_half"}


@pytest.mark.torch
def test_a_step_the_grad_scaler_skips_is_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load(ENTRY)
    monkeypatch.setattr(m, "BATCH", 64)
    checks = m.train_step("cpu", 64, precision="fp16")
    assert failed(checks) == set()
    assert "skipped by the GradScaler" in checks["params_trained"]["detail"]
    # at the first scale (2**16) this step overflows: with no second try nothing trains
    monkeypatch.setattr(m, "MAX_SKIPPED", 0)
    assert failed(m.train_step("cpu", 64, precision="fp16")) == {"params_trained"}


@pytest.mark.torch
def test_loss_finite_and_params_trained_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load(ENTRY)
    import torch

    monkeypatch.setattr(m, "BATCH", 64)
    nan = m.make_model

    def poisoned(device):
        model = nan(device)
        with torch.no_grad():
            model[0].weight.fill_(float("nan"))
        return model

    monkeypatch.setattr(m, "make_model", poisoned)
    assert {"loss_finite", "params_trained"} <= failed(m.train_step("cpu", 64, batch=64))


@pytest.mark.torch
def test_params_trained_fails_where_a_tensor_does_not_move(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load(ENTRY)
    frozen = m.make_big_model

    def with_frozen_layer(device, width):
        model = frozen(device, width)
        model[0].weight.requires_grad_(False)
        return model

    monkeypatch.setattr(m, "make_big_model", with_frozen_layer)
    checks = m.train_step("cpu", 4, width=16, batch=4)
    assert failed(checks) == {"params_trained"}
    assert "0.weight" in checks["params_trained"]["detail"]


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("the test interpreter has CUDA")
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    assert len(m.VARIANTS) == 10
    for name, f in m.VARIANTS.items():
        assert f is not None, name
        for precision in ("fp32", "fp16", "bf16"):
            with pytest.raises(m.Unsupported, match="needs a CUDA device"):
                f("cuda", precision)
    # stopped before its setting: nothing of the allocator's was touched, CUDA never started
    assert "PYTORCH_ALLOC_CONF" not in os.environ
    assert "PYTORCH_CUDA_ALLOC_CONF" not in os.environ
    assert not torch.cuda.is_initialized()
