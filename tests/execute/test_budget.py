"""The GPU window's plan (harness/execute/budget.py): the jobs of the committed entries on
the box's stack, their order of value, the budget's arithmetic and what a cut leaves."""

from __future__ import annotations

import io

import pytest

from harness.execute.budget import (
    CUDA_START_S,
    DEFAULT_S,
    PROCESS_START_S,
    STARTUP_S,
    Estimate,
    by_value,
    describe_fit,
    estimate_from,
    fit,
    phase_of,
)
from harness.execute.plan import Job, make_plan
from harness.outcomes import Outcome
from harness.spec.entries import Entry, load_entries
from harness.spec.matrix import Environment, Expansion, load_matrix
from harness.store.records import Record
from tests.paths import REPO, committed_records

H200 = {"gpu": "NVIDIA H200"}
SEEDS = (
    "pytorch/grad-scale-unscale-error",
    "lightning/gradient-clipping-optimizer-handles-unscaling",
)
# the GPU box's stack (docs/how-to/gpu-machine.md): python3 3.12, torch 2.11, lightning 2.6.6
BOX = Environment("3.12", "2.11.0", "2.6.6", interpreter="/usr/bin/python3")


@pytest.fixture(scope="module")
def entries() -> tuple[Entry, ...]:
    return load_entries(REPO / "repros")


@pytest.fixture(scope="module")
def box(entries: tuple[Entry, ...]) -> tuple[Expansion, list[Job]]:
    expansion = load_matrix(REPO / "matrix.yaml").expand_for(BOX, "gpu-nightly")
    return expansion, list(make_plan(expansion, entries).jobs)


@pytest.fixture(scope="module")
def stored() -> list[Record]:
    from harness.store.jsonl import Store

    return list(Store(committed_records()).load().records)


def rec(entry: str, variant: str, seconds: float, **kw: object) -> Record:
    fields: dict[str, object] = {
        "entry": entry,
        "variant": variant,
        "kind": "baseline",
        "cell": "c-cpu-fp32",
        "env": "c",
        "device": "cpu",
        "precision": "fp32",
        "trial": 0,
        "outcome": Outcome.OK,
        "duration_s": seconds,
        **kw,
    }
    return Record(**fields)  # type: ignore[arg-type]


def test_the_box_runs_every_cuda_variant_of_the_committed_entries(entries, box) -> None:
    expansion, jobs = box
    cells = expansion.cells
    assert {c.device for c in cells} == {"cuda"} and expansion.trials == 3
    # counted from entry.yaml's devices and precisions, not from the planner
    expected = sum(
        expansion.trials
        for entry in entries
        for variant in entry.variants
        if variant.written and "cuda" in variant.devices
        for cell in cells
        if cell.precision in variant.precisions
    )
    assert len(jobs) == expected > 0
    # an entry whose variants are not written yet (None in VARIANTS) has nothing to run
    with_cuda = {
        e.id for e in entries if any("cuda" in v.devices and v.written for v in e.variants)
    }
    assert {j.entry.id for j in jobs} == with_cuda
    assert set(SEEDS) <= with_cuda
    assert any(e.startswith("deadends/pytorch/") for e in with_cuda)


def test_value_order_baselines_then_one_trial_then_the_other_trials(box) -> None:
    _, jobs = box
    ordered = by_value(jobs)
    assert sorted(j.id for j in ordered) == sorted(j.id for j in jobs)
    phases = [phase_of(j) for j in ordered]
    assert phases == sorted(phases)  # never a later phase before an earlier one
    counts = [phases.count(p) for p in range(3)]
    baselines = sum(1 for j in jobs if j.variant.kind == "baseline" and j.trial == 0)
    firsts = sum(1 for j in jobs if j.trial == 0)
    assert counts == [baselines, firsts - baselines, len(jobs) - firsts]
    assert counts[2] == 2 * (counts[0] + counts[1])  # three trials: two more of each
    # every entry's baselines come before any entry's workaround
    first_other = phases.index(1)
    assert {j.entry.id for j in ordered[:first_other]} == {
        j.entry.id for j in jobs if j.variant.kind == "baseline"
    }
    # the other trials: trial 1 of every job before any trial 2
    trials = [j.trial for j in ordered if phase_of(j) == 2]
    assert trials == sorted(trials) and set(trials) == {1, 2}
    # within a phase, the plan's order, the jobs alone on the GPU (gpu: exclusive) last; and
    # the order is a function of the jobs alone
    first = [j for j in ordered if phase_of(j) == 0]
    alone = [j.device_use == "exclusive" for j in first]
    assert any(alone) and alone == sorted(alone)
    for exclusive in (False, True):
        assert [j.id for j in first if (j.device_use == "exclusive") == exclusive] == [
            j.id for j in jobs if phase_of(j) == 0 and (j.device_use == "exclusive") == exclusive
        ]
    assert [j.id for j in by_value(jobs)] == [j.id for j in ordered]


def test_estimates_come_from_stored_cpu_durations_plus_the_cuda_start(box) -> None:
    _, jobs = box
    job = next(j for j in jobs if j.entry.id == SEEDS[0] and j.variant.kind == "baseline")
    other = next(j for j in jobs if j.entry.id == SEEDS[0] and j.variant.name != job.variant.name)
    stored = [
        rec(job.entry.id, job.variant.name, 1.0),
        rec(job.entry.id, job.variant.name, 3.0),
        rec(job.entry.id, job.variant.name, 2.0),
        rec(job.entry.id, job.variant.name, 50.0, outcome=Outcome.SKIPPED),  # nothing ran
        rec(job.entry.id, "some-other-variant", 10.0),
    ]
    est = estimate_from(stored, cuda_start_s=1.5)
    assert est.source(job) == (2.0, "variant")  # the median of 1, 2, 3
    assert est(job) == 2.0 + 1.5  # a cuda cell: a child's CUDA start on top
    # no record of that variant: the entry's median (1, 2, 3, 10)
    assert est.source(other) == (2.5, "entry") and est(other) == 4.0
    unknown = next(j for j in jobs if j.entry.id != SEEDS[0])
    assert est.source(unknown) == (DEFAULT_S, "default")
    assert estimate_from([]).cuda_start_s == CUDA_START_S


def test_a_fresh_interpreter_costs_its_start_where_no_record_of_its_variant_holds_it(box) -> None:
    import dataclasses

    _, jobs = box
    job = next(j for j in jobs if j.variant.isolation != "process")
    fresh = dataclasses.replace(job, variant=dataclasses.replace(job.variant, isolation="process"))
    est = estimate_from([], cuda_start_s=1.0)
    assert est(fresh) - est(job) == PROCESS_START_S
    # a stored duration of the variant itself was measured with its interpreter's start
    timed = estimate_from([rec(job.entry.id, job.variant.name, 4.0)], cuda_start_s=1.0)
    assert timed(fresh) == timed(job) == 4.0 + (1.0 if job.cell.device == "cuda" else 0.0)


def test_a_box_s_own_cuda_records_time_its_next_call(box) -> None:
    """The first call's CUDA records (their CUDA start included) time the next call's jobs
    of the same variants; skipped ones (nothing ran) do not."""
    _, jobs = box
    job = next(j for j in jobs if j.entry.id == SEEDS[0])
    key = (job.entry.id, job.variant.name)
    stored = [
        rec(*key, 1.0),
        rec(*key, 4.0, device="cuda", provenance=H200),
        rec(*key, 6.0, device="cuda", provenance=H200),
        rec(*key, 0.01, device="cuda", outcome=Outcome.SKIPPED, provenance=H200),
        # the other_error of a check on a machine without a GPU (a typo caught there)
        rec(*key, 0.02, device="cuda", outcome=Outcome.OTHER_ERROR, provenance={"gpu": "none"}),
    ]
    est = estimate_from(stored, cuda_start_s=2.0)
    assert est.source(job) == (5.0, "cuda") and est(job) == 5.0  # no start added on top
    assert est.by_variant[key] == est.by_entry[key[0]] == 1.0  # CPU medians: CPU records
    cpu_only = estimate_from(stored[:1] + stored[3:], cuda_start_s=2.0)  # no GPU's record
    assert cpu_only.source(job) == (1.0, "variant") and cpu_only(job) == 3.0


def test_the_committed_records_time_most_jobs(box, stored) -> None:
    _, jobs = box
    est = estimate_from(stored)
    sources = [est.source(j)[1] for j in jobs]
    assert sources.count("variant") > len(jobs) / 2
    assert all(est(j) >= CUDA_START_S for j in jobs)


def test_jobs_share_the_slots_and_the_budget_cuts_a_prefix(box) -> None:
    _, jobs = box
    ordered = by_value(jobs)[:10]
    est = Estimate(default_s=4.0, cuda_start_s=1.0, process_start_s=0.0)  # every job: 4 + 1 s
    whole = fit(ordered, est, slots=2, budget_s=None, startup_s=10.0)
    assert whole.kept == 10 and whole.ends == (5, 5, 10, 10, 15, 15, 20, 20, 25, 25)
    assert whole.estimated_s == 10.0 + 25.0
    # 10 s start + 3 rounds of 5 s on 2 slots = 25 s: six jobs; the seventh would end at 30 s
    cut = fit(ordered, est, slots=2, budget_s=27.0, startup_s=10.0)
    assert cut.kept == 6 and cut.chosen == tuple(ordered[:6]) and cut.left == tuple(ordered[6:])
    assert cut.estimated_s == 25.0
    # one slot: a job after another
    assert fit(ordered, est, slots=1, budget_s=27.0, startup_s=10.0).kept == 3
    # nothing fits a budget shorter than the start
    assert fit(ordered, est, slots=8, budget_s=STARTUP_S - 1).kept == 0


def test_a_longer_job_holds_its_slot(box) -> None:
    _, jobs = box
    a, b, c = by_value(jobs)[:3]
    est = Estimate(by_variant={(a.entry.id, a.variant.name): 9.0}, default_s=1.0, cuda_start_s=0)
    # a takes slot 1 for 9 s; b and c run one after the other on slot 2
    assert fit([a, b, c], est, slots=2, budget_s=None, startup_s=0).ends == (9.0, 1.0, 2.0)


def test_a_variant_with_requirements_and_no_record_of_its_own_is_timed_by_its_requirements() -> (
    None
):
    from harness.spec.matrix import Cell

    entries = load_entries(REPO / "repros")
    job = next(
        Job(e, v, Cell(BOX, "cuda", "fp32"), 0)
        for e in entries
        for v in e.variants
        if e.requirements_for(v) and "cuda" in v.devices
    )
    stored = [
        rec(
            "another/entry",
            "v",
            seconds,
            requires={str(i): r for i, r in enumerate(job.env.requires)},
        )
        for seconds in (2.0, 4.0, 9.0)
    ]
    stored.append(rec("another/entry", "w", 100.0, requires={"x": "six<2"}))  # other requirements
    est = estimate_from(stored, cuda_start_s=1.0)
    assert est.source(job) == (4.0, "requires") and est(job) == 5.0
    assert estimate_from([], cuda_start_s=1.0).source(job) == (DEFAULT_S, "default")


def test_under_python_a_variant_with_requirements_costs_nothing() -> None:
    from harness.spec.matrix import Cell

    entries = load_entries(REPO / "repros")
    job = next(
        Job(e, v, Cell(BOX, "cpu", "fp32"), 0)
        for e in entries
        for v in e.variants
        if e.requirements_for(v)
    )
    assert job.env.requires
    assert Estimate(existing=True).source(job) == (0.0, "decided")
    assert Estimate(existing=False).source(job)[1] != "decided"


def test_the_plan_over_the_committed_entries_fits_ten_minutes_or_says_what_is_left(
    box, stored
) -> None:
    _, jobs = box
    est = estimate_from(stored, existing=True)
    planned = fit(by_value(jobs), est, slots=8, budget_s=570)
    lines = describe_fit(planned)
    text = "\n".join(lines)
    assert f"{len(jobs)} jobs to run" in lines[0]
    assert "phase 1, baselines, one trial" in text and "phase 3, the other trials" in text
    assert planned.estimated_s <= 570
    if planned.left:
        assert f"left for the next call (--resume): {len(planned.left)} jobs" in text
    else:
        assert "left for the next call: nothing" in text
    # a short window: the baselines first, the rest left
    short = fit(by_value(jobs), est, slots=8, budget_s=STARTUP_S + 20)
    assert 0 < short.kept < len(jobs)
    assert {phase_of(j) for j in short.chosen} == {0}
    assert "left for the next call (--resume)" in "\n".join(describe_fit(short))


def test_a_second_call_plans_only_what_the_first_left(box, tmp_path) -> None:
    """--resume: the jobs the machine stored are not planned again; the next call's plan
    starts where the cut was (the real steps: drop_done, then the budget)."""
    import dataclasses

    from rich.console import Console

    from harness.config import Config
    from harness.execute.plan import Plan
    from harness.execute.steps import RunState, budget_fit, drop_done, order_jobs
    from harness.store.jsonl import Store

    _, jobs = box
    console = Console(file=io.StringIO(), width=200)
    cfg = Config(repo=tmp_path, machine="box", resume=True, budget_s=STARTUP_S + 30, jobs=8)
    first = RunState(cfg, console, plan=Plan(tuple(jobs), ()))
    assert isinstance(drop_done(first), RunState) and len(first.todo) == len(jobs)
    assert isinstance(order_jobs(first), RunState)
    cut = len(first.todo)
    assert 0 < cut < len(jobs) and first.todo == by_value(jobs)[:cut]
    store = Store(tmp_path / "results" / "records", "box")
    for job in first.todo:  # what the first call stored
        store.append(
            dataclasses.replace(
                rec(job.entry.id, job.variant.name, 0.1, device="cuda"),
                kind=job.variant.kind,
                cell=job.cell.id,
                env=job.cell.env.id,
                precision=job.cell.precision,
                trial=job.trial,
                outcome=Outcome.SKIPPED,
            )
        )
    second = RunState(dataclasses.replace(cfg), console, plan=Plan(tuple(jobs), ()))
    drop_done(second)
    assert len(second.todo) == len(jobs) - cut
    planned = budget_fit(second)
    assert planned.jobs == tuple(by_value(jobs)[cut:])  # the next call starts at the cut
    assert not {j.key for j in planned.jobs} & {j.key for j in first.todo}


def test_the_cuda_start_the_window_measured_times_the_next_plan(box) -> None:
    """Each child's CUDA start (a GPU record's provenance, harness/execute/runner.py) is the
    next plan's start per child; --cuda-start-s still wins, and without a measured one the
    stated guess holds."""
    _, jobs = box
    job = next(j for j in jobs if j.entry.id == SEEDS[0] and j.cell.device == "cuda")
    key = (job.entry.id, job.variant.name)
    measured = [
        rec(*key, 4.0, device="cuda", provenance={**H200, "cuda_start_s": "0.400"}),
        rec(*key, 5.0, device="cuda", provenance={**H200, "cuda_start_s": "0.600"}),
        rec(*key, 6.0, device="cuda", provenance={**H200, "cuda_start_s": "0.700"}),
        # a machine without a GPU measured nothing of it
        rec(*key, 0.1, device="cuda", provenance={"gpu": "none", "cuda_start_s": "9.0"}),
        rec(*key, 1.0),
    ]
    est = estimate_from(measured)
    assert (est.cuda_start_s, est.cuda_start_from, est.cuda_starts) == (0.6, "measured", 3)
    other = next(j for j in jobs if j.cell.device == "cuda" and j.entry.id != SEEDS[0])
    assert est(other) == est.source(other)[0] + 0.6
    line = describe_fit(fit([other], est, slots=1, budget_s=None))[1]
    assert "+ 0.6 s CUDA start per child on a cuda cell (CPU-timed; the median of 3 starts" in line
    assert estimate_from(measured, cuda_start_s=1.5).cuda_start_from == "given"
    guess = estimate_from(measured[3:])
    assert (guess.cuda_start_s, guess.cuda_start_from) == (CUDA_START_S, "default")
