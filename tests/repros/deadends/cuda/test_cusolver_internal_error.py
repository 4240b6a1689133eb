"""deadends/cuda/cusolver-internal-error/cuda12-a100: each postcondition shown able to fail on
the real torch of the test interpreter (the records already show solution_finite,
solves_system and bad_input_found failing), the CUDA variants' preconditions on the CPU."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/cusolver-internal-error/cuda12-a100"

pytestmark = pytest.mark.torch


def test_the_cpu_twin_refuses_the_singular_matrix():
    repro = load(ENTRY)
    with pytest.raises(RuntimeError, match="singular"):
        repro.baseline_singular_cpu("cpu", "fp32")
    assert failed(repro.baseline_nan_cpu("cpu", "fp32")) == {"solution_finite", "solves_system"}


def test_control_and_checks():
    repro = load(ENTRY)
    assert failed(repro.control_well_conditioned("cpu", "fp32")) == set()
    assert failed(repro.workaround1_check_nan_inf_literal("cpu", "fp32")) == {"bad_input_found"}
    assert failed(repro.workaround1_check_singular_sensible("cpu", "fp32")) == set()
    assert failed(repro.workaround2_regularize("cpu", "fp32")) == set()


def test_solves_original_system_fails_for_an_inconsistent_system(monkeypatch):
    repro = load(ENTRY)
    original = repro.system

    def inconsistent(device, case):
        a, b = original(device, case)
        b = b.clone()
        b[2] = b[0] + 1  # rows 0 and 2 of A are equal, so no x gives these two
        return a, b

    monkeypatch.setattr(repro, "system", inconsistent)
    checks = repro.workaround2_regularize("cpu", "fp32")
    assert failed(checks) == {"solves_original_system"}


@pytest.mark.parametrize(
    "name", ["baseline-singular-cuda", "baseline-nan-cuda", "deadend2-cpu-fallback"]
)
def test_cuda_variants_are_unsupported_on_the_cpu(name):
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs a CUDA device"):
        repro.VARIANTS[name]("cpu", "fp32")
