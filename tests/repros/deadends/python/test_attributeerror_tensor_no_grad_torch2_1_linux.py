"""deadends/python/attributeerror-tensor-no-grad/torch2.1-linux: its postconditions shown able
to fail, on the test interpreter's real torch (grad_present fails in the records: the
baseline that reads x.grad finds None)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/python/attributeerror-tensor-no-grad/torch2.1-linux"


@pytest.mark.torch
def test_tensor_trained_fails_without_an_update() -> None:
    m = load(ENTRY)
    # a gradient present but a zero learning rate: the learned tensor stays where it was
    assert failed(m.train("fp32", make=m.tracked, lr=0.0)) == {"tensor_trained"}
    assert failed(m.train("fp32", make=m.tracked)) == set()


@pytest.mark.torch
def test_grad_present_fails_on_a_short_loop() -> None:
    m = load(ENTRY)
    # the read-only baseline finds no gradient; the loop's own check counts its steps
    assert failed(m.grad_after_backward("fp32")) == {"grad_present"}
    assert failed(m.grad_after_backward("fp32", make=m.tracked)) == set()
