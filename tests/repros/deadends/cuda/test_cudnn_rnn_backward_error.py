"""deadends/cuda/cudnn-rnn-backward-error/cuda12-a100: a CUDA-only entry; its LSTM step and its
timing run on the CPU here, each postcondition shown able to fail, and every variant's
precondition exercised (Unsupported without CUDA), so the GPU window is not spent on a typo."""

from __future__ import annotations

import types

import pytest
from torch import nn

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/cudnn-rnn-backward-error/cuda12-a100"

pytestmark = pytest.mark.torch


def test_the_lstm_step_runs_on_the_cpu_in_every_layout():
    repro = load(ENTRY)
    for x_contig in (False, True):
        for h_contig in (False, True):
            checks = repro.run("cpu", "fp32", batch=8, x_contig=x_contig, h_contig=h_contig)
            assert failed(checks) == set()
    checks = repro.run("cpu", "fp32", batch=8, enabled=False, benchmark=False)
    assert failed(checks) == set()


def test_every_weight_has_grad_fails_with_a_frozen_weight(monkeypatch):
    repro = load(ENTRY)

    class Frozen(nn.LSTM):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.weight_hh_l1.requires_grad_(False)

    monkeypatch.setattr(repro, "nn", types.SimpleNamespace(LSTM=Frozen))
    checks = repro.run("cpu", "fp32", batch=8)
    assert failed(checks) == {"every_weight_has_grad"}
    assert "weight_hh_l1" in checks["every_weight_has_grad"]["detail"]


def test_grads_finite_fails_on_a_nan_input(monkeypatch):
    repro = load(ENTRY)
    original = repro.inputs

    def nan_inputs(*args):
        x, h0, c0 = original(*args)
        return x * float("nan"), h0, c0

    monkeypatch.setattr(repro, "inputs", nan_inputs)
    assert failed(repro.run("cpu", "fp32", batch=8)) == {"grads_finite"}


def test_the_slowdown_check_and_its_timing():
    repro = load(ENTRY)
    took = repro.seconds(repro.conv_step("cpu"), "cpu", repeat=1)
    assert took > 0
    assert failed(repro.slowdown_check(took, 2 * took)) == set()
    assert failed(repro.slowdown_check(took, 6 * took)) == {"conv_within_record_slowdown"}


@pytest.mark.parametrize("name", sorted(n for n in load(ENTRY).VARIANTS))
def test_every_variant_is_unsupported_on_the_cpu(name):
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs a CUDA device"):
        repro.VARIANTS[name]("cpu", "fp32")
