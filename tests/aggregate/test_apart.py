"""Runs that measured the harness, set apart: torch's fork guard raised in a job the warm
worker forked (the torch 2.3.1 CPU cells of three dead ends that call .cuda())."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.aggregate import aggregate_entry
from harness.aggregate.apart import FORK_REFUSAL, FORK_WHY, refused_in_the_harness_fork
from harness.aggregate.smells import find_smells
from harness.outcomes import Outcome
from harness.spec.entries import Entry, Signature, Variant
from harness.store.records import ExceptionInfo, Record

HERE = Path("/nonexistent/document.md")
E1, E2 = "py3.11-torch2.2.2-lightning2.6.6", "py3.11-torch2.3.1-lightning2.6.6"
NO_DRIVER = "Found no NVIDIA driver on your system."
REFUSED = FORK_REFUSAL + ". To use CUDA with multiprocessing, you must use the 'spawn' start method"


def entry(documented: str = "cannot pin memory: CUDA not available") -> Entry:
    # pin-memory-error's dead end 2: its own signature is loose enough to read the refusal
    loose = Signature("Exception", "NVIDIA driver|CUDA|accelerator")
    return Entry(
        id="pytorch/demo",
        dir=HERE.parent,
        title="Demo",
        signature=Signature("RuntimeError", documented),
        claims=None,  # type: ignore[arg-type]
        variants=(
            Variant("base", "baseline", "the error"),
            Variant("de", "dead_end", "forces CUDA", signature=loose),
        ),
        source=HERE,
        document=HERE,
        repro=HERE,
    )


def rec(variant: str, env: str, message: str, isolation: str = "fork", trial: int = 0) -> Record:
    return Record(
        entry="pytorch/demo",
        variant=variant,
        kind="dead_end" if variant == "de" else "baseline",
        cell=f"{env}-cpu-fp32",
        env=env,
        device="cpu",
        precision="fp32",
        trial=trial,
        outcome=Outcome.OTHER_ERROR,
        exception=ExceptionInfo(
            "RuntimeError", message, "torch/cuda/__init__.py:279 in _lazy_init"
        ),
        versions={"torch": env.split("-torch")[1].split("-")[0]},
        started_at="2026-12-02T03:18:20+00:00",
        isolation=isolation,
    )


def _runs(isolation: str = "fork", documented: str = "cannot pin memory") -> list[Record]:
    return [rec("de", E1, NO_DRIVER, isolation, t) for t in range(3)] + [
        rec("de", E2, REFUSED, isolation, t) for t in range(3)
    ]


def test_the_fork_guard_in_a_forked_job_is_set_apart_with_why() -> None:
    agg = aggregate_entry(entry(), _runs())
    de = agg.variant("de")
    # only the release that answered for itself counts: 3 runs, its own signature
    assert de.runs == 3 and [row[0] for row in de.by_env] == [E1]
    assert [(n.outcome, n.reason, n.count, n.envs) for n in de.not_counted] == [
        ("other_error", FORK_WHY, 3, (E2,))  # as recorded
    ]
    assert refused_in_the_harness_fork(entry(), "fork", REFUSED) == FORK_WHY


def test_the_fork_guard_counts_in_a_fresh_process_and_where_it_is_the_documented_error() -> None:
    # a fresh interpreter forked nothing of the harness's: what it raised is the variant's
    de = aggregate_entry(entry(), _runs("process")).variant("de")
    assert de.runs == 6 and not de.not_counted
    # multiprocessing-cuda-error: the refusal is the error the entry documents
    documents = entry(documented="Cannot re-initialize CUDA in forked subprocess")
    de = aggregate_entry(documents, _runs()).variant("de")
    assert de.runs == 6 and not de.not_counted
    assert refused_in_the_harness_fork(documents, "fork", REFUSED) is None


def test_smells_do_not_read_the_set_apart_runs() -> None:
    # the baseline raises what the dead end raises in every release; the dead end's refused
    # runs (torch 2.3.1) are not what it does, so the two still read as the same case
    base = [
        dataclasses.replace(r, variant="base", kind="baseline", isolation="process")
        for r in _runs()
    ]
    base = [
        dataclasses.replace(r, exception=ExceptionInfo("RuntimeError", NO_DRIVER, "")) for r in base
    ]
    de = [
        dataclasses.replace(r, exception=ExceptionInfo("RuntimeError", NO_DRIVER, ""))
        for r in _runs()
        if r.env == E1
    ]
    refused = [r for r in _runs() if r.env == E2]
    assert [s.kind for s in find_smells(entry(), [*base, *de, *refused])] == ["same-as-variant"]
