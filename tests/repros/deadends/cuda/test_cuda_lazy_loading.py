"""deadends/cuda/cuda-lazy-loading/cuda12-rtx4090: a CUDA-only entry; its start-up script runs
on the CPU here (unset, EAGER, from a start-up file), each postcondition shown able to fail,
and every variant's precondition exercised (Unsupported without CUDA)."""

from __future__ import annotations

import shutil

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/cuda-lazy-loading/cuda12-rtx4090"

pytestmark = pytest.mark.torch


def test_the_script_reads_back_the_mode_it_was_given(tmp_path):
    repro = load(ENTRY)
    unset = repro.init_script("cpu")
    assert unset["mode"] is None and unset["used_mib"] is None  # no CUDA started here
    assert failed(repro.lazy_checks(unset)) == {"lazy_loading_in_effect"}
    eager = repro.init_script("cpu", {repro.VARIABLE: "EAGER"})
    assert eager["mode"] == "EAGER"
    if shutil.which("bash") is not None:
        rc = tmp_path / ".bashrc"
        rc.write_text(f"export {repro.VARIABLE}=LAZY\n")
        assert failed(repro.lazy_checks(repro.init_script("cpu", rc_file=str(rc)))) == set()


def test_no_lazy_loading_warning_fails_on_such_a_warning():
    repro = load(ENTRY)
    got = {"warnings": ["UserWarning: CUDA lazy loading is not enabled"], "mode": "LAZY"}
    assert failed(repro.lazy_checks(got)) == {"no_lazy_loading_warning"}


def test_memory_and_start_checks_fail():
    repro = load(ENTRY)
    lazy = {"used_mib": 500.0}
    assert failed(repro.memory_check({"used_mib": 600.0}, lazy)) == set()
    assert failed(repro.memory_check({"used_mib": 900.0}, lazy)) == {"memory_as_lazy"}
    # each process's own memory (NVML) wins where both reports have it
    own = {"used_mib": 900.0, "own_mib": 300.0}
    assert failed(repro.memory_check(own, {"used_mib": 500.0, "own_mib": 250.0})) == set()
    assert failed(repro.memory_check(own, {"used_mib": 500.0, "own_mib": 10.0})) == {
        "memory_as_lazy"
    }
    cpu = repro.init_script("cpu", {repro.VARIABLE: "LAZY"})  # no device memory on the CPU
    assert cpu["own_mib"] is None
    assert failed(repro.memory_check(cpu, lazy)) == {"memory_as_lazy"}
    assert failed(repro.started(cpu)) == {"cuda_started"}


@pytest.mark.parametrize("name", sorted(load(ENTRY).VARIANTS))
def test_every_variant_is_unsupported_on_the_cpu(name):
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs a CUDA device"):
        repro.VARIANTS[name]("cpu", "fp32")
