"""What a free slot of a run does next (harness.execute.steps._next_work): environments are
prepared ahead of their jobs, up to one per slot at once, with a bounded number open."""

from __future__ import annotations

import collections

from harness.execute.steps import LOOKAHEAD, EnvRun, _next_work
from harness.spec.matrix import Environment


def _runs(n: int, jobs: int = 3) -> list[EnvRun]:
    return [
        EnvRun(Environment("3.11", f"2.{i}.0", "2.6.6"), collections.deque(range(jobs)))  # type: ignore[arg-type]
        for i in range(n)
    ]


def _take(runs: list[EnvRun], slots: int) -> list[tuple[int, object]]:
    """Fill ``slots`` free slots: (index of the environment, job or None for prepare)."""
    taken = []
    for _ in range(slots):
        picked = _next_work(runs, slots)
        if picked is None:
            break
        run, job = picked
        if job is None:
            run.preparing = True
        else:
            run.running += 1
        taken.append((runs.index(run), job))
    return taken


def _prepared(run: EnvRun) -> None:
    run.preparing, run.prepared = False, True


def test_one_slot_prepares_one_environment_at_a_time() -> None:
    runs = _runs(3)
    assert _take(runs, 1) == [(0, None)]
    assert _next_work(runs, 1) is None  # the slot is busy; nothing else can start
    _prepared(runs[0])
    # the next environment's preparation comes first: it overlaps environment 0's jobs
    assert _next_work(runs, 1) == (runs[1], None)


def test_two_slots_prepare_two_environments_at_once() -> None:
    runs = _runs(4)
    assert _take(runs, 2) == [(0, None), (1, None)]
    _prepared(runs[0])
    # two preparing at most; three open at most (LOOKAHEAD + slots - 1)
    assert LOOKAHEAD + 1 == 3
    picked = _next_work(runs, 2)
    assert picked is not None and picked[0] is runs[2] and picked[1] is None
    runs[2].preparing = True
    picked = _next_work(runs, 2)  # three open: the next slot runs a job of environment 0
    assert picked is not None and picked[0] is runs[0] and picked[1] == 0


def test_jobs_run_when_every_environment_is_open() -> None:
    runs = _runs(1, jobs=2)
    assert _take(runs, 2) == [(0, None)]  # one environment: one preparation, then nothing
    _prepared(runs[0])
    assert _take(runs, 2) == [(0, 0), (0, 1)]
    assert _next_work(runs, 2) is None
