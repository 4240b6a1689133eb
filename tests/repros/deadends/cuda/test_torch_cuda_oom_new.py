"""deadends/cuda/torch-cuda-oom-new/torch2-a100: the training step every variant runs, shown
on the CPU (the variants themselves need CUDA), each postcondition able to fail."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/torch-cuda-oom-new/torch2-a100"


@pytest.mark.torch
def test_every_method_of_the_step_runs_and_a_short_step_fails_samples_per_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = load(ENTRY)
    monkeypatch.setattr(m, "BATCH", 64)
    assert failed(m.train_step("cpu", 64)) == set()
    assert failed(m.train_step("cpu", 64, micro=2)) == set()
    assert failed(m.train_step("cpu", 64, forward=m.checkpointed)) == set()
    assert failed(m.train_step("cpu", 64, precision="bf16")) == set()
    assert failed(m.train_step("cpu", 32)) == {"samples_per_step"}


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
    assert {"loss_finite", "params_trained"} <= failed(m.train_step("cpu", 64))


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    m = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("the test interpreter has CUDA")
    for name, f in m.VARIANTS.items():
        with pytest.raises(m.Unsupported):
            f("cuda", "bf16" if "mixed" in name else "fp32")
