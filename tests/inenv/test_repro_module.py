"""The child loads repro.py as a real module (harness/inenv/child.py, REPRO_MODULE registered
in sys.modules for the run), in both isolation modes: a dataclass under `from __future__ import
annotations`, pickling a class repro.py defines, torch.save of one, and DataLoader workers that
send such objects back all work (tests/resources/entries/tiny/module)."""

from __future__ import annotations

import pytest

from harness.execute.plan import Job
from harness.execute.runner import run_job
from harness.inenv.child import REPRO_MODULE
from harness.outcomes import Outcome
from harness.spec.entries import load_entry
from tests.paths import REPO, RESOURCES


@pytest.fixture
def module_entry():
    return load_entry(RESOURCES / "entries" / "tiny" / "module", RESOURCES / "entries")


def _run(entry, variant: str, host_env, cell, worker):
    job = Job(entry, entry.variant(variant), cell, 0)
    record = run_job(job, host_env, timeout_s=120, memory_limit_mb=0, provenance={}, worker=worker)
    assert record.isolation == ("fork" if worker is not None else "process")
    return record


@pytest.mark.parametrize("variant", ["dataclass", "pickle"])
def test_a_reproducer_is_a_module_dataclasses_and_pickle_can_find(
    module_entry, host_env, cpu_cell, worker, variant: str
) -> None:
    record = _run(module_entry, variant, host_env, cpu_cell, worker)
    assert record.outcome is Outcome.OK, (record.reason, record.exception)


@pytest.mark.torch
@pytest.mark.parametrize("variant", ["torch-save", "dataloader"])
def test_torch_save_and_dataloader_workers_find_the_reproducers_classes(
    module_entry, host_env, cpu_cell, worker, variant: str
) -> None:
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    record = _run(module_entry, variant, host_env, cpu_cell, worker)
    assert record.outcome is Outcome.OK, (record.reason, record.exception)


def test_a_variant_not_written_is_skipped_and_an_unknown_one_is_an_error(
    module_entry, host_env, cpu_cell, worker
) -> None:
    from dataclasses import replace

    assert not module_entry.variant("todo").written  # never planned; run anyway here
    todo = _run(module_entry, "todo", host_env, cpu_cell, worker)
    assert todo.outcome is Outcome.SKIPPED and "VARIANTS maps 'todo' to None" in todo.reason
    nope = replace(module_entry.variant("pickle"), name="nope")
    job = Job(module_entry, nope, cpu_cell, 0)
    record = run_job(job, host_env, timeout_s=120, memory_limit_mb=0, provenance={}, worker=worker)
    assert record.outcome is Outcome.OTHER_ERROR
    assert (
        record.exception.type == "ValueError"
        and "unknown variant 'nope'" in record.exception.message
    )


def test_the_hand_run_loads_it_under_the_childs_name() -> None:
    # the same module name by hand (repros/reprokit.py) as in the harness: records and a
    # hand run name a reproducer's own classes the same way
    import ast

    tree = ast.parse((REPO / "repros" / "reprokit.py").read_text())
    [value] = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["REPRO_MODULE"]
    ]
    assert ast.literal_eval(value) == REPRO_MODULE == "repro_under_test"
