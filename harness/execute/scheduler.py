"""What each slot of a run does next: plain bookkeeping over the jobs, no processes and no I/O
(pytest-xdist's schedulers), so that it is tested with fake jobs.

Jobs are grouped by environment, in the order they come. An environment is prepared (built
or reused, health-checked, its warm worker started) ahead of its jobs, up to one per slot at
once and with a bounded number open; a prepared environment's jobs go out in order. The
scheduler also counts what was stored (by outcome), what failed and what was left without a
record, which is what a run reports and what ``--resume`` runs again.

The GPU is a pool of tokens, one per slot (``Device``): a job of a cuda cell that shares the
device (``shared``) holds one, a job that must run alone on it (``exclusive``: it fills the
card, sizes itself from free memory, times kernels or measures memory) holds all of them, a
job of a CPU cell (``none``) holds none. A CUDA job that cannot take its tokens waits, and
the CUDA jobs after it wait behind it (first come, first served: an exclusive job is never
starved by the shared ones after it), while CPU jobs go on in the free slots.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["DEVICE_USES", "FAILED", "LOOKAHEAD", "Device", "Prepare", "Run", "Scheduler"]

E = TypeVar("E", bound=Hashable)  # an environment
J = TypeVar("J")  # a job

FAILED = ("crashed", "timeout", "env_failed")  # runs that measured nothing about the variant
LOOKAHEAD = 2  # with one slot: environments prepared (or being prepared) and not finished
DEVICE_USES = ("none", "shared", "exclusive")  # what a job takes of the GPU (Job.device_use)


class Device:
    """The GPU as ``tokens`` tokens: a shared job holds one, an exclusive job all of them."""

    def __init__(self, tokens: int) -> None:
        self.tokens = max(1, tokens)
        self.held: dict[int, int] = {}  # id(job) -> tokens it holds

    @property
    def free(self) -> int:
        return self.tokens - sum(self.held.values())

    def wants(self, use: str) -> int:
        if use not in DEVICE_USES:
            raise ValueError(f"unknown device use {use!r}; known: {list(DEVICE_USES)}")
        return {"none": 0, "shared": 1, "exclusive": self.tokens}[use]

    def can_take(self, use: str) -> bool:
        return self.wants(use) <= self.free

    def take(self, job: object, use: str) -> None:
        n = self.wants(use)
        if n > self.free:
            raise ValueError(f"the device has {self.free} free tokens; a {use} job takes {n}")
        if n:
            self.held[id(job)] = n

    def give(self, job: object) -> None:
        self.held.pop(id(job), None)


@dataclass(frozen=True)
class Prepare(Generic[E]):
    """Prepare ``env`` in this slot (a build, or a health check that is the warm worker's
    one import)."""

    env: E


@dataclass(frozen=True)
class Run(Generic[E, J]):
    """Run ``job`` of the prepared ``env`` in this slot."""

    env: E
    job: J


@dataclass
class _Queue(Generic[E, J]):
    """One environment's share of the run."""

    env: E
    jobs: collections.deque[J]
    prepared: bool = False
    preparing: bool = False
    running: list[J] = field(default_factory=list)

    @property
    def open(self) -> bool:
        """Prepared (or being prepared) and not finished: it holds a warm worker."""
        return (self.prepared or self.preparing) and not self.finished

    @property
    def finished(self) -> bool:
        return self.prepared and not self.jobs and not self.running


def _job_env(job: Any) -> Any:
    return job.env  # a harness.execute.plan.Job: its cell's environment, or one derived from it


class Scheduler(Generic[E, J]):
    """Hands out work to ``slots`` slots and keeps the run's counts. Every method is called
    from one thread (the run loop's); a slot is taken by ``next_work`` and given back by
    ``prepared`` (a preparation), ``recorded`` or ``lost`` (a job)."""

    def __init__(
        self,
        jobs: Iterable[J],
        slots: int = 1,
        env_of: Callable[[J], E] = _job_env,
        lookahead: int = LOOKAHEAD,
        device_use: Callable[[J], str] = lambda job: "none",
    ) -> None:
        self.slots = max(1, slots)
        self.lookahead = lookahead
        self.env_of = env_of
        self.device_use = device_use
        self.device = Device(self.slots)
        self._queues: dict[E, _Queue[E, J]] = {}
        self.total = 0
        for job in jobs:
            env = env_of(job)
            if env not in self._queues:
                self._queues[env] = _Queue(env, collections.deque())
            self._queues[env].jobs.append(job)
            self.total += 1
        self.counts: collections.Counter[str] = collections.Counter()  # records, by outcome
        self.unrecorded: list[J] = []  # jobs the harness itself failed on: no record
        self._preparing: list[E] = []  # in the order their preparation started
        self.stopped = False

    # -- what the run reports --------------------------------------------------------------

    @property
    def done(self) -> int:
        """Records stored."""
        return sum(self.counts.values())

    @property
    def left(self) -> int:
        """Jobs without a record yet: queued, running, or left without one (--resume's)."""
        return self.total - self.done

    @property
    def failed(self) -> int:
        return sum(self.counts[k] for k in FAILED)

    @property
    def preparing(self) -> tuple[E, ...]:
        return tuple(self._preparing)

    @property
    def busy(self) -> int:
        return len(self._preparing) + sum(len(q.running) for q in self._queues.values())

    @property
    def finished(self) -> bool:
        return all(q.finished for q in self._queues.values())

    def env_finished(self, env: E) -> bool:
        """Every job of ``env`` has ended: its warm worker can stop."""
        return self._queues[env].finished

    # -- what a free slot does -------------------------------------------------------------

    def next_work(self) -> Prepare[E] | Run[E, J] | None:
        """Take a free slot: prepare the next environment, else run the next job of the
        earliest prepared one; None when no slot is free or nothing can start yet.

        Preparing comes first, so that it overlaps the runs of the environment before it. Up
        to ``slots`` environments are prepared at once (where environments hold few jobs, a
        run is a row of imports: one at a time would leave the other slots waiting), with at
        most ``lookahead + slots - 1`` open (each holds a warm worker)."""
        if self.stopped or self.busy >= self.slots:
            return None
        queues = self._queues.values()
        open_envs = sum(1 for q in queues if q.open)
        if len(self._preparing) < self.slots and open_envs < self.lookahead + self.slots - 1:
            for q in queues:
                if not q.prepared and not q.preparing:
                    q.preparing = True
                    self._preparing.append(q.env)
                    return Prepare(q.env)
        waiting = False  # a CUDA job waits for its tokens: the CUDA jobs after it wait too
        for q in queues:
            if not q.prepared:
                continue
            for index, job in enumerate(q.jobs):
                use = self.device_use(job)
                if use != "none" and (waiting or not self.device.can_take(use)):
                    waiting = True
                    continue
                del q.jobs[index]
                self.device.take(job, use)
                q.running.append(job)
                return Run(q.env, job)
        return None

    def prepared(self, env: E, failed: bool = False) -> tuple[J, ...]:
        """``env``'s preparation ended (its slot is free): its queued jobs. Where it
        ``failed`` they are taken out of the queue: each gets an env_failed record."""
        q = self._queues[env]
        if not q.preparing:
            raise ValueError(f"{env} is not being prepared")
        q.preparing, q.prepared = False, True
        self._preparing.remove(env)
        jobs = tuple(q.jobs)
        if failed:
            q.jobs.clear()
        return jobs

    def withdraw(self, env: E, jobs: Iterable[J]) -> None:
        """Take ``jobs`` (as ``prepared`` gave them) of ``env`` out of its queue: they were
        decided without a run (e.g. skipped: no CUDA here) and get records without a slot."""
        gone = {id(j) for j in jobs}
        q = self._queues[env]
        q.jobs = collections.deque(j for j in q.jobs if id(j) not in gone)

    def recorded(self, job: J, outcome: str) -> None:
        """``job``'s record is stored; the slot it ran in, if it ran, is free."""
        self._release(job)
        self.counts[outcome] += 1

    def lost(self, job: J) -> None:
        """``job`` ran and the harness failed on it: no record (the run goes on, ends
        non-zero, and --resume runs it again); its slot is free."""
        self._release(job)
        self.unrecorded.append(job)

    def stop(self) -> None:
        """The run is interrupted or cut: nothing more is handed out. What has no record
        (``left``) is what --resume runs."""
        self.stopped = True

    def _release(self, job: J) -> None:
        running = self._queues[self.env_of(job)].running
        for held in running:  # a job decided without a run held no slot
            if held == job:
                running.remove(held)
                self.device.give(held)  # the tokens of the job handed out (by identity)
                break
