"""A rehearsal of the GPU window on CPU: the committed entries' jobs on the GPU box's stack go
through the real scheduler, in the budget's order, on a simulated clock; each job holds the
device (the scheduler's tokens) from its start to its end, and the test reads who held it
when. No two exclusive jobs, and no exclusive and shared job, ever hold it at once, across the
phases and a resumed second call; jobs of CPU cells go on beside an exclusive one; and the
budget's plan (harness/execute/budget.py) is the schedule the scheduler keeps."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from harness.execute.budget import STARTUP_S, Estimate, by_value, estimate_from, fit, phase_of
from harness.execute.plan import Job, make_plan
from harness.execute.scheduler import Prepare, Scheduler
from harness.spec.entries import load_entries
from harness.spec.matrix import Environment, load_matrix
from tests.paths import REPO, committed_records

BOX = Environment("3.12", "2.11.0", "2.6.6", interpreter="/usr/bin/python3")
SLOTS = 8


@dataclass(frozen=True)
class Held:
    """A job's time on a slot, and what it took of the device meanwhile."""

    job: Job
    start: float
    end: float
    use: str  # none, shared, exclusive


def rehearse(jobs: Sequence[Job], cost: Callable[[Job], float], start: float = 0.0) -> list[Held]:
    """The scheduler runs ``jobs`` on SLOTS slots; a job takes ``cost(job)`` simulated seconds
    (its environment's preparation none). What each job held, and when."""
    sched: Scheduler[Environment, Job] = Scheduler(
        jobs, SLOTS, device_use=lambda job: job.device_use
    )
    now, running, held = start, [], []
    order = 0  # ties on the clock: the job started first ends first
    while not sched.finished:
        while (work := sched.next_work()) is not None:
            if isinstance(work, Prepare):
                sched.prepared(work.env)
                continue
            job = work.job
            end = now + cost(job)
            held.append(Held(job, now, end, job.device_use))
            heapq.heappush(running, (end, order, job))
            order += 1
        assert running, "the scheduler holds jobs back with nothing running"
        now, _, job = heapq.heappop(running)
        sched.recorded(job, "ok")
    return held


def overlaps(held: Sequence[Held]) -> list[tuple[str, str]]:
    """Pairs of jobs that held the device at once where one of them is exclusive."""
    on_device = sorted((h for h in held if h.use != "none"), key=lambda h: h.start)
    found = []
    for i, a in enumerate(on_device):
        for b in on_device[i + 1 :]:
            if b.start >= a.end:
                continue  # sorted by start: b and a do not meet (later ones may: go on)
            if "exclusive" in (a.use, b.use):
                found.append((a.job.id, b.job.id))
    return found


@pytest.fixture(scope="module")
def box_jobs() -> list[Job]:
    expansion = load_matrix(REPO / "matrix.yaml").expand_for(BOX, "gpu-nightly")
    return by_value(make_plan(expansion, load_entries(REPO / "repros")).jobs)


@pytest.fixture(scope="module")
def estimate() -> Estimate:
    from harness.store.jsonl import Store

    return estimate_from(Store(committed_records()).load().records, existing=True)


def test_the_committed_entries_declare_exclusive_jobs(box_jobs) -> None:
    alone = {j.entry.id for j in box_jobs if j.device_use == "exclusive"}
    assert "deadends/cuda/cublas-status-not-initialized/cuda12-linux" in alone
    assert "deadends/pytorch/cuda-out-of-memory/pytorch2-linux" in alone
    assert {phase_of(j) for j in box_jobs if j.device_use == "exclusive"} == {0, 1, 2}


def test_no_exclusive_job_shares_the_device_across_the_phases_and_a_resumed_call(
    box_jobs, estimate
) -> None:
    first = fit(box_jobs, estimate, slots=SLOTS, budget_s=570)
    assert 0 < first.kept < len(box_jobs)  # the window holds part of it: a second call
    one = rehearse(first.chosen, estimate)
    # the second call (--resume) plans what the first left, in the same order
    rest = fit(first.left, estimate, slots=SLOTS, budget_s=None)
    two = rehearse(rest.chosen, estimate, start=max(h.end for h in one) + STARTUP_S)
    held = one + two
    assert len(held) == len(box_jobs)
    alone = [h for h in held if h.use == "exclusive"]
    shared = [h for h in held if h.use == "shared"]
    assert alone and shared and {phase_of(h.job) for h in alone} == {0, 1, 2}
    assert overlaps(held) == []
    # not vacuous: the shared jobs do overlap one another (8 slots, one device)
    assert any(b.start < a.end for a, b in zip(shared, shared[1:], strict=False))


def test_the_plan_is_the_schedule_the_scheduler_keeps(box_jobs, estimate) -> None:
    """The budget's arithmetic holds the exclusive jobs as the scheduler runs them: the same
    end, and more than if they shared the device."""
    held = rehearse(box_jobs, estimate)
    planned = fit(box_jobs, estimate, slots=SLOTS, budget_s=None)
    sharing = fit(box_jobs, estimate, slots=SLOTS, budget_s=None, device=False)
    assert max(h.end for h in held) == pytest.approx(max(planned.ends))
    assert max(planned.ends) > max(sharing.ends)


def test_cpu_jobs_go_on_beside_an_exclusive_job(box_jobs, estimate) -> None:
    """A CPU cell's job takes no token: it starts while an exclusive job holds the device,
    and no CUDA job does."""
    alone = [j for j in box_jobs if j.device_use == "exclusive"][:3]
    shared = [j for j in box_jobs if j.device_use == "shared"][:6]
    on_cpu = [
        dataclasses.replace(j, cell=dataclasses.replace(j.cell, device="cpu")) for j in shared
    ]
    held = rehearse([*alone, *shared, *on_cpu], lambda job: 10.0)
    assert overlaps(held) == []
    first = next(h for h in held if h.use == "exclusive")
    beside = [h for h in held if h.start < first.end and h.end > first.start and h is not first]
    assert beside and {h.use for h in beside} == {"none"}
    # the exclusive jobs ran one after another, the shared ones after them
    ends = sorted(h.end for h in held if h.use == "exclusive")
    assert ends == [10.0, 20.0, 30.0]
    assert min(h.start for h in held if h.use == "shared") == 30.0
