"""deadends/python/attributeerror-tensor-no-grad/torch2.0-linux: its postconditions shown able
to fail, on the test interpreter's real torch (grad_present fails in the records: the
baseline that reads x.grad finds None)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/python/attributeerror-tensor-no-grad/torch2.0-linux"


@pytest.mark.torch
def test_tensor_trained_fails_without_an_update() -> None:
    m = load(ENTRY)
    assert failed(m.train("fp32", make=m.tracked, lr=0.0)) == {"tensor_trained"}
    assert failed(m.train("fp32", make=m.tracked)) == set()


@pytest.mark.torch
def test_grad_correct_fails_on_another_chain() -> None:
    m = load(ENTRY)

    # a step whose intermediate is 3 * the leaf: its gradient is a third of the leaf's, not half
    def tripled(fn):
        def run(raw, model, target, retain):
            hidden = raw * 3.0
            hidden.retain_grad()
            return hidden, ((model(hidden) - target) ** 2).mean()

        return run

    assert failed(m.intermediate_grad("fp32", wrap=tripled)) == {"grad_correct"}
    assert failed(m.intermediate_grad("fp32", retain=True)) == set()
