"""Workarounds applied to their baseline's faulty code, not the control's: each calls its
reproducer's step with the baseline's own options plus the workaround's action only.
deadends/pytorch/cudnn-rnn-backward-error/torch2-linux (workaround 2, packing) and
deadends/pytorch/device-mismatch/pytorch2-linux (workarounds 1 and 3); both are CUDA entries,
their steps' options are read here with the real torch, and device-mismatch's run on the CPU."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

CUDNN = "deadends/pytorch/cudnn-rnn-backward-error/torch2-linux"
DEVICE = "deadends/pytorch/device-mismatch/pytorch2-linux"


def options(repro, step: str, variant: str, monkeypatch) -> dict:
    """The keyword options ``variant`` passes to the module's ``step`` function."""
    seen: list[dict] = []
    monkeypatch.setattr(repro, step, lambda device, **kwargs: seen.append(kwargs) or {})
    repro.VARIANTS[variant]("cuda", "fp32")
    assert len(seen) == 1
    return seen[0]


@pytest.mark.torch
def test_cudnn_workaround_2_packs_the_first_baselines_batch(monkeypatch) -> None:
    repro = load(CUDNN)
    baseline = options(repro, "lstm_step", "baseline-noncontiguous-hidden", monkeypatch)
    workaround = options(repro, "lstm_step", "workaround2-pack-padded", monkeypatch)
    control = options(repro, "lstm_step", "control-contiguous-packed", monkeypatch)
    assert workaround == {**baseline, "packed": True}
    assert workaround != control


@pytest.mark.torch
def test_device_mismatch_workarounds_keep_their_baselines_fault(monkeypatch) -> None:
    repro = load(DEVICE)
    baseline1 = options(repro, "one_step", "baseline-input-left-on-cpu", monkeypatch)
    workaround1 = options(repro, "one_step", "workaround1-device-variable", monkeypatch)
    assert {k: v for k, v in workaround1.items() if k != "check"} == baseline1
    assert callable(workaround1["check"])
    baseline2 = options(repro, "one_step", "baseline-loss-weight-on-cpu", monkeypatch)
    workaround3 = options(repro, "one_step", "workaround3-loss-to-device", monkeypatch)
    assert {k: v for k, v in workaround3.items() if k != "fix_criterion"} == baseline2
    assert callable(workaround3["fix_criterion"])


@pytest.mark.torch
def test_device_mismatch_workarounds_run_through_on_a_cpu_cell() -> None:
    repro = load(DEVICE)
    assert failed(repro.VARIANTS["workaround1-device-variable"]("cpu", "fp32")) == set()
    assert failed(repro.VARIANTS["workaround3-loss-to-device"]("cpu", "fp32")) == set()
