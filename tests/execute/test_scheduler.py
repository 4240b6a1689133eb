"""The scheduler with fake jobs and no processes: which environment is prepared and which job
runs next, how many slots are busy, what an environment that failed does to its jobs, and
what the counts say after an interruption."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.execute.scheduler import LOOKAHEAD, Prepare, Run, Scheduler


@dataclass(frozen=True)
class FakeJob:
    env: str
    name: str


def jobs(spec: str) -> list[FakeJob]:
    """ "a1 b1 a2" -> jobs a1 (of environment a), b1, a2, in that order."""
    return [FakeJob(word[0], word) for word in spec.split()]


def scheduler(spec: str, slots: int = 1) -> Scheduler[str, FakeJob]:
    return Scheduler(jobs(spec), slots, env_of=lambda j: j.env)


def take(s: Scheduler[str, FakeJob]) -> list[str]:
    """Fill the free slots: "prepare a" or the job's name, for each slot taken."""
    taken = []
    while (work := s.next_work()) is not None:
        taken.append(f"prepare {work.env}" if isinstance(work, Prepare) else work.job.name)
    return taken


def test_jobs_are_grouped_by_environment_in_the_order_they_come() -> None:
    s = scheduler("a1 b1 a2 c1 b2")
    assert s.total == 5 and take(s) == ["prepare a"]
    assert s.prepared("a") == (FakeJob("a", "a1"), FakeJob("a", "a2"))
    # one slot: the next environment's preparation first, so that it overlaps a's jobs
    assert take(s) == ["prepare b"]
    assert s.prepared("b") == (FakeJob("b", "b1"), FakeJob("b", "b2"))
    # two open (LOOKAHEAD): c waits until a or b is finished; a's jobs go out in order
    assert take(s) == ["a1"]
    s.recorded(FakeJob("a", "a1"), "ok")
    assert take(s) == ["a2"]
    s.recorded(FakeJob("a", "a2"), "ok")
    assert s.env_finished("a") and not s.env_finished("b")
    assert take(s) == ["prepare c"]


def test_one_slot_prepares_one_environment_at_a_time() -> None:
    s = scheduler("a1 a2 a3 b1 b2 b3 c1 c2 c3")
    assert take(s) == ["prepare a"]
    assert s.next_work() is None  # the slot is busy; nothing else can start
    s.prepared("a")
    assert s.next_work() == Prepare("b")


def test_two_slots_prepare_two_environments_at_once() -> None:
    s = scheduler("a1 a2 a3 b1 b2 b3 c1 c2 c3 d1 d2 d3", slots=2)
    assert take(s) == ["prepare a", "prepare b"]
    s.prepared("a")
    # two preparing at most; three open at most (LOOKAHEAD + slots - 1)
    assert LOOKAHEAD + 1 == 3
    assert s.next_work() == Prepare("c")
    assert s.next_work() is None  # both slots busy (b and c preparing)
    s.prepared("b")
    assert s.next_work() == Run("a", FakeJob("a", "a1"))  # three open: a job of a


def test_jobs_run_when_every_environment_is_open() -> None:
    s = scheduler("a1 a2", slots=2)
    assert take(s) == ["prepare a"]  # one environment: one preparation, then nothing
    s.prepared("a")
    assert take(s) == ["a1", "a2"]
    assert s.busy == 2 and s.next_work() is None


def test_a_slot_is_free_again_when_its_job_is_recorded_or_lost() -> None:
    s = scheduler("a1 a2 a3", slots=2)
    take(s)
    s.prepared("a")
    assert take(s) == ["a1", "a2"]
    s.lost(FakeJob("a", "a2"))  # the harness failed on it: no record
    assert s.busy == 1 and take(s) == ["a3"]
    s.recorded(FakeJob("a", "a1"), "ok")
    assert not s.finished
    s.recorded(FakeJob("a", "a3"), "crashed")
    assert s.finished and s.busy == 0
    assert s.unrecorded == [FakeJob("a", "a2")]
    assert (s.done, s.left, s.failed) == (2, 1, 1)  # a2 is left for --resume


def test_a_failed_environment_hands_none_of_its_jobs_out() -> None:
    s = scheduler("a1 a2 b1")
    take(s)
    failed = s.prepared("a", failed=True)
    assert failed == (FakeJob("a", "a1"), FakeJob("a", "a2"))
    for job in failed:  # each gets an env_failed record without a slot
        s.recorded(job, "env_failed")
    assert s.env_finished("a") and s.busy == 0
    assert take(s) == ["prepare b"]  # the next environment is tried
    assert s.prepared("b") == (FakeJob("b", "b1"),)
    assert take(s) == ["b1"]
    s.recorded(FakeJob("b", "b1"), "reproduced")
    assert s.finished
    assert s.counts == {"env_failed": 2, "reproduced": 1} and s.failed == 2


def test_jobs_decided_before_running_are_withdrawn() -> None:
    s = scheduler("a1 a2 a3")
    take(s)
    queued = s.prepared("a")
    s.withdraw("a", [queued[0], queued[2]])  # e.g. cuda cells on a machine without CUDA
    for job in (queued[0], queued[2]):
        s.recorded(job, "skipped")
    assert take(s) == ["a2"]
    assert s.next_work() is None
    s.recorded(queued[1], "ok")
    assert s.finished and s.done == 3


def test_preparing_names_the_environments_in_the_order_they_started() -> None:
    s = scheduler("a1 b1 c1", slots=3)
    assert take(s) == ["prepare a", "prepare b", "prepare c"]
    assert s.preparing == ("a", "b", "c")
    s.prepared("b")
    assert s.preparing == ("a", "c")


def test_an_interrupted_run_hands_nothing_more_out_and_counts_what_is_left() -> None:
    s = scheduler("a1 a2 a3 b1", slots=2)
    take(s)
    s.prepared("a")
    assert take(s) == ["a1"]  # b is still preparing
    s.recorded(FakeJob("a", "a1"), "ok")
    s.stop()
    assert s.next_work() is None  # a free slot, queued jobs: nothing starts
    assert not s.finished
    # the record stored is done; the rest (queued, running, preparing) is --resume's
    assert (s.done, s.left, s.total) == (1, 3, 4)


def test_a_preparation_that_did_not_start_is_refused() -> None:
    s = scheduler("a1 b1")
    take(s)
    with pytest.raises(ValueError, match="b is not being prepared"):
        s.prepared("b")


def test_no_jobs_is_finished_at_once() -> None:
    s = scheduler("")
    assert s.finished and s.next_work() is None and s.left == 0


@dataclass(frozen=True)
class CudaJob:
    env: str
    name: str
    use: str  # none, shared, exclusive


def device_scheduler(spec: str, slots: int) -> Scheduler[str, CudaJob]:
    """ "s1 x1 c1": shared, exclusive, CPU-cell jobs of one environment, in that order."""
    uses = {"s": "shared", "x": "exclusive", "c": "none"}
    made = [CudaJob("a", word, uses[word[0]]) for word in spec.split()]
    s = Scheduler(made, slots, env_of=lambda j: j.env, device_use=lambda j: j.use)
    assert take_device(s) == ["prepare a"]
    s.prepared("a")
    return s


def take_device(s: Scheduler[str, CudaJob]) -> list[str]:
    taken = []
    while (work := s.next_work()) is not None:
        taken.append(f"prepare {work.env}" if isinstance(work, Prepare) else work.job.name)
    return taken


def test_an_exclusive_job_waits_for_the_device_and_the_cuda_jobs_after_it_wait_too() -> None:
    s = device_scheduler("s1 x1 s2 c1 c2 x2", slots=4)
    # s1 holds a token; x1 needs all of them: it waits, s2 queues behind it, CPU jobs go on
    assert take_device(s) == ["s1", "c1", "c2"]
    assert s.device.free == 3
    s.recorded(CudaJob("a", "s1", "shared"), "ok")
    assert take_device(s) == ["x1"] and s.device.free == 0
    s.recorded(CudaJob("a", "x1", "exclusive"), "ok")
    assert take_device(s) == ["s2"]  # x2 waits for s2
    s.recorded(CudaJob("a", "s2", "shared"), "ok")
    assert take_device(s) == ["x2"]


def test_a_lost_job_gives_its_tokens_back() -> None:
    s = device_scheduler("x1 s1", slots=2)
    assert take_device(s) == ["x1"]
    s.lost(CudaJob("a", "x1", "exclusive"))
    assert s.device.free == 2 and take_device(s) == ["s1"]


def test_an_unknown_device_use_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown device use 'all'"):
        device_scheduler("s1", slots=1).device.wants("all")
