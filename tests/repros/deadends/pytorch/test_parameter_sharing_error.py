"""deadends/pytorch/parameter-sharing-error/pt2-linux: workaround 1 (tie by assignment) is
applied to the first baseline, which already ties that way, and keeps its optimizer: the
tied weight is still stepped twice (one_sgd_step fails); handing the optimizer only unique
parameters, workaround 2's action, is what makes the same step pass."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/pytorch/parameter-sharing-error/pt2-linux"


@pytest.mark.torch
def test_workaround_1_keeps_the_baselines_double_step() -> None:
    repro = load(ENTRY)
    checks = repro.VARIANTS["workaround1-tie-by-assignment"]("cpu", "fp32")
    assert failed(checks) == {"one_sgd_step"}
    assert "holds 2 tensors for 1 distinct parameters" in checks["one_sgd_step"]["detail"]


@pytest.mark.torch
def test_one_sgd_step_holds_where_the_optimizer_gets_unique_parameters() -> None:
    repro = load(ENTRY)
    assert failed(repro.VARIANTS["workaround2-set-of-parameters"]("cpu", "fp32")) == set()
    assert failed(repro.one_step("cpu")) == set()  # model.parameters(): the tied weight once
