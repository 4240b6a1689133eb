"""A short window on a machine (the GPU box): jobs in order of value, each job's duration
estimated, and the plan cut to what fits the budget; the rest is the next call's (--resume).

Order (``by_value``), deterministic: phase 1, each entry's baselines, one trial (trial 0);
phase 2, one trial of every other variant; phase 3, the other trials, trial 1 of every job
before trial 2. Within a phase the plan's own order (environment, cell, entry, variant),
the jobs that run alone on the GPU (``gpu: exclusive``) last: the device is emptied once per
phase for them, not once for each.

Arithmetic (``estimate_from`` and ``fit``): a job on a CUDA cell costs the median
``duration_s`` of the stored CUDA records of its entry and variant where there are some (a
GPU box's earlier call: its CUDA start included); else the median of the stored CPU records
of its entry and variant, else of its entry, else (a variant with requirements) of the CPU
records made with the same requirements (transformers' import, say, is most of a small
reproducer's time), else ``DEFAULT_S``, and a job on a CUDA cell
adds ``CUDA_START_S``, since each job is a fresh child (forked from a warm
worker that must not have touched CUDA) and creates its own CUDA context; a job whose
variant has requirements costs nothing under ``--python`` where that interpreter does not
already satisfy them (it is decided without a run: nothing is installed into an existing
interpreter); where it does (the GPU box's wheel folder), the job is timed like any other. The jobs go, in order, to ``slots``
parallel slots, each to the one free first (what the scheduler does with one
environment), under the scheduler's device rule (harness/execute/scheduler.py): an
exclusive job starts when every CUDA job before it has ended, a CUDA job after it when it
has ended; CPU jobs are not held. The run starts after ``STARTUP_S`` (the harness loads,
the interpreter is inspected, the warm worker imports torch and lightning). The plan keeps
the longest prefix whose estimated end is within the budget.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.config import CUDA_START_S
from harness.execute.plan import Job
from harness.execute.runner import CUDA_START_KEY
from harness.outcomes import Outcome
from harness.spec.entries import Entry
from harness.store.records import Record

__all__ = [
    "CUDA_START_S",
    "DEFAULT_S",
    "PROCESS_START_S",
    "PHASES",
    "STARTUP_S",
    "Estimate",
    "Fit",
    "by_value",
    "describe_fit",
    "estimate_from",
    "fit",
    "phase_of",
]

PHASES = ("baselines, one trial", "one trial of every other variant", "the other trials")
# before the first job: the harness's inputs, the interpreter inspected (one torch import),
# the warm worker's torch and lightning import (cold caches on a fresh box: ~10-20 s)
STARTUP_S = 30.0
# a job whose entry has no stored CPU duration (a CUDA-only entry): the median of the
# committed CPU records is ~0.3 s; a CUDA reproducer trains a few steps, so 3 s
DEFAULT_S = 3.0
# a variant with `isolation: process` starts a fresh interpreter per job (torch and lightning
# imported again: 3-5 s on a 16-core box with warm caches, 10-12 s on this 2-core machine);
# a stored duration of such a variant already holds it, an entry's or the default does not
PROCESS_START_S = 5.0
# records whose duration says nothing about a run (none ran)
_NOT_TIMED = {Outcome.SKIPPED.value, Outcome.ENV_FAILED.value}


def phase_of(job: Job) -> int:
    """0: a baseline's first trial; 1: any other variant's first trial; 2: later trials."""
    if job.trial > 0:
        return 2
    return 0 if job.variant.kind == "baseline" else 1


def by_value(jobs: Iterable[Job]) -> list[Job]:
    """The jobs, most valuable first (module docstring); stable, so deterministic."""
    indexed = list(enumerate(jobs))
    indexed.sort(
        key=lambda item: (
            phase_of(item[1]),
            item[1].trial,
            item[1].device_use == "exclusive",
            item[0],
        )
    )
    return [job for _, job in indexed]


@dataclass(frozen=True)
class Estimate:
    """Seconds per job: stored CPU medians, the CUDA start, and where each figure came from."""

    by_variant: dict[tuple[str, str], float] = field(default_factory=dict)  # CPU records
    by_entry: dict[str, float] = field(default_factory=dict)
    default_s: float = DEFAULT_S
    cuda_start_s: float = CUDA_START_S
    existing: bool = False  # run --python: a variant with requirements is decided, not run
    met: frozenset[tuple[str, ...]] = frozenset()  # ... unless that interpreter meets them
    on_cuda: dict[tuple[str, str], float] = field(default_factory=dict)  # CUDA records
    process_start_s: float = PROCESS_START_S
    # CPU records by the requirements they ran with (a derived environment's)
    by_requires: dict[frozenset[str], float] = field(default_factory=dict)
    # where cuda_start_s came from: "given" (--cuda-start-s), "measured" (the median of the
    # CUDA starts GPU records measured), "default" (CUDA_START_S)
    cuda_start_from: str = "default"
    cuda_starts: int = 0  # the measured starts it is the median of

    def source(self, job: Job) -> tuple[float, str]:
        """(seconds, "cuda" | "variant" | "entry" | "requires" | "default" | "decided"); all
        but "cuda" before the CUDA start."""
        if self.existing and job.env.requires and job.env.requires not in self.met:
            return 0.0, "decided"
        key = (job.entry.id, job.variant.name)
        if job.cell.device == "cuda" and key in self.on_cuda:
            return self.on_cuda[key], "cuda"
        if key in self.by_variant:
            return self.by_variant[key], "variant"
        if job.entry.id in self.by_entry:
            return self.by_entry[job.entry.id], "entry"
        if job.env.requires and frozenset(job.env.requires) in self.by_requires:
            return self.by_requires[frozenset(job.env.requires)], "requires"
        return self.default_s, "default"

    def __call__(self, job: Job) -> float:
        seconds, where = self.source(job)
        if where in ("decided", "cuda"):
            return seconds
        if where in ("entry", "requires", "default") and job.variant.isolation == "process":
            seconds += self.process_start_s
        return seconds + (self.cuda_start_s if job.cell.device == "cuda" else 0.0)


def _measured_start(record: Record) -> float | None:
    """The CUDA context start a child measured (harness/execute/runner.py), or None."""
    try:
        seconds = float(record.provenance.get(CUDA_START_KEY, ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds < 600 else None


def estimate_from(
    records: Iterable[Record],
    *,
    cuda_start_s: float | None = None,
    default_s: float = DEFAULT_S,
    existing: bool = False,
    met: Iterable[tuple[str, ...]] = (),
) -> Estimate:
    """The medians of the stored records that ran (every machine's, every environment's): CPU
    records per entry and variant and per entry, CUDA records per entry and variant; and the
    CUDA start per child: ``cuda_start_s`` where given, else the median of the starts the
    GPU records measured, else CUDA_START_S."""
    by_variant: dict[tuple[str, str], list[float]] = {}
    by_entry: dict[str, list[float]] = {}
    on_cuda: dict[tuple[str, str], list[float]] = {}
    by_requires: dict[frozenset[str], list[float]] = {}
    starts: list[float] = []
    for r in records:
        if r.outcome.value in _NOT_TIMED or r.duration_s is None or not r.duration_s > 0:
            continue
        # a CUDA record of a machine without a GPU timed only the child's checks
        if r.device == "cuda" and r.provenance.get("gpu", "none") not in ("", "none"):
            on_cuda.setdefault((r.entry, r.variant), []).append(r.duration_s)
            start = _measured_start(r)
            if start is not None:
                starts.append(start)
        if r.device != "cpu":
            continue
        by_variant.setdefault((r.entry, r.variant), []).append(r.duration_s)
        by_entry.setdefault(r.entry, []).append(r.duration_s)
        if r.requires:
            by_requires.setdefault(frozenset(r.requires.values()), []).append(r.duration_s)
    if cuda_start_s is not None:
        start_s, start_from = cuda_start_s, "given"
    elif starts:
        start_s, start_from = statistics.median(starts), "measured"
    else:
        start_s, start_from = CUDA_START_S, "default"
    return Estimate(
        {k: statistics.median(v) for k, v in by_variant.items()},
        {k: statistics.median(v) for k, v in by_entry.items()},
        default_s,
        start_s,
        existing,
        frozenset(met),
        {k: statistics.median(v) for k, v in on_cuda.items()},
        PROCESS_START_S,
        {k: statistics.median(v) for k, v in by_requires.items()},
        start_from,
        len(starts),
    )


@dataclass(frozen=True)
class Fit:
    """The jobs to do, in order, and how many of them (a prefix) fit the budget."""

    jobs: tuple[Job, ...]
    kept: int
    ends: tuple[float, ...]  # each kept job's estimated end, seconds after the start
    slots: int
    budget_s: float | None
    startup_s: float
    estimate: Estimate

    @property
    def chosen(self) -> tuple[Job, ...]:
        return self.jobs[: self.kept]

    @property
    def left(self) -> tuple[Job, ...]:
        return self.jobs[self.kept :]

    @property
    def estimated_s(self) -> float:
        """The kept jobs' estimated wall time, the start included."""
        return self.startup_s + (max(self.ends) if self.ends else 0.0)


def fit(
    jobs: Sequence[Job],
    estimate: Estimate,
    *,
    slots: int,
    budget_s: float | None,
    startup_s: float = STARTUP_S,
    device: bool = True,
) -> Fit:
    """``jobs`` (in the order they run) on ``slots`` slots, cut to ``budget_s`` (None: all).

    List scheduling: each job starts on the slot that frees first, and (``device``) not
    before the GPU lets it: an exclusive job after every CUDA job before it has ended, a
    CUDA job after the exclusive job before it has ended (the scheduler's device tokens);
    ``device`` False: every CUDA job shares the GPU (what exclusivity adds, by difference).
    The first job whose estimated end passes the budget, and every job after it, is left (a
    prefix is kept, so that the next call starts where this one ended)."""
    slots = max(1, slots)
    free = [0.0] * slots  # when each slot frees, a heap
    ends: list[float] = []
    cuda_end = 0.0  # when every CUDA job so far has ended
    exclusive_end = 0.0  # when the last exclusive job ends
    for job in jobs:
        start = heapq.heappop(free)
        use = job.device_use if device else "none"
        if use == "exclusive":
            start = max(start, cuda_end)
        elif use == "shared":
            start = max(start, exclusive_end)
        end = start + estimate(job)
        if budget_s is not None and startup_s + end > budget_s:
            break
        heapq.heappush(free, end)
        ends.append(end)
        if use != "none":
            cuda_end = max(cuda_end, end)
        if use == "exclusive":
            exclusive_end = end
    return Fit(tuple(jobs), len(ends), tuple(ends), slots, budget_s, startup_s, estimate)


def _describe_exclusive(plan: Fit) -> list[str]:
    """The jobs that run alone on the GPU, by variant, and the minutes that adds to the
    whole plan (every job, no budget) over every CUDA job sharing it."""
    alone = [j for j in plan.jobs if j.device_use == "exclusive"]
    if not alone:
        return ["exclusive on the GPU (gpu: exclusive): no job"]
    whole = fit(plan.jobs, plan.estimate, slots=plan.slots, budget_s=None)
    shared = fit(plan.jobs, plan.estimate, slots=plan.slots, budget_s=None, device=False)
    jobs_of: dict[tuple[str, str], int] = {}  # (entry, variant) -> its exclusive jobs
    entries: dict[str, Entry] = {}
    for job in alone:
        key = (job.entry.id, job.variant.name)
        jobs_of[key] = jobs_of.get(key, 0) + 1
        entries[job.entry.id] = job.entry
    seconds = sum(plan.estimate(j) for j in alone)
    lines = [
        f"exclusive on the GPU (gpu: exclusive; each runs alone on it, CPU jobs go on): "
        f"{len(alone)} jobs of {len(jobs_of)} variants, {seconds / 60:.1f} min of job time; "
        f"they add {(whole.estimated_s - shared.estimated_s) / 60:.1f} min to all "
        f"{len(plan.jobs)} jobs ({whole.estimated_s / 60:.1f} min, "
        f"{shared.estimated_s / 60:.1f} if they shared it)"
    ]
    for entry_id, entry in entries.items():
        names = [v.name for v in entry.variants if (entry_id, v.name) in jobs_of]
        cuda = [v.name for v in entry.variants if "cuda" in v.devices and v.written]
        what = f"every cuda variant ({len(names)})" if names == cuda else ", ".join(names)
        n = sum(jobs_of[(entry_id, name)] for name in names)
        lines.append(f"    {entry_id}: {what}, {n} jobs")
    return lines


def describe_fit(plan: Fit, stored: int = 0, examples: int = 3) -> list[str]:
    """The plan for a reader: the arithmetic, per phase the jobs, those kept and the estimated
    minute its last kept job ends, the first jobs of each phase, and what is left."""
    est = plan.estimate
    sources: dict[str, int] = {}
    for job in plan.jobs:
        where = est.source(job)[1]
        sources[where] = sources.get(where, 0) + 1
    budget = "no budget" if plan.budget_s is None else f"budget {plan.budget_s:g} s"
    lines = [
        f"{len(plan.jobs)} jobs to run ({stored} already stored), -j {plan.slots}, {budget}",
        "estimate per job: the median duration_s of the stored CUDA records of its entry and "
        f"variant ({sources.get('cuda', 0)} jobs), else of the CPU records of its entry and "
        f"variant ({sources.get('variant', 0)} jobs), else of its entry "
        f"({sources.get('entry', 0)}), else of the records made with its requirements "
        f"({sources.get('requires', 0)}), else {est.default_s:g} s ({sources.get('default', 0)})"
        + (
            f"; 0 s for a variant with requirements ({sources['decided']}: nothing is "
            "installed into an existing interpreter)"
            if sources.get("decided")
            else ""
        )
        + f"; + {est.process_start_s:g} s for a fresh interpreter (isolation: process) not "
        "timed by its own records"
        + f"; + {est.cuda_start_s:.3g} s CUDA start per child on a cuda cell (CPU-timed; "
        + {
            "given": "as given",
            "measured": f"the median of {est.cuda_starts} starts the GPU records measured",
            "default": "a stated guess: no GPU record measured one yet",
        }[est.cuda_start_from]
        + "); "
        f"+ {plan.startup_s:g} s start (harness, interpreter, warm worker)",
    ]
    total = sum(est(j) for j in plan.jobs)
    lines.append(
        f"all {len(plan.jobs)} jobs: {total / 60:.1f} min of job time, "
        f"{(plan.startup_s + total / plan.slots) / 60:.1f} min on {plan.slots} slots"
    )
    lines += _describe_exclusive(plan)
    for phase, name in enumerate(PHASES):
        index = [i for i, j in enumerate(plan.jobs) if phase_of(j) == phase]
        kept = [i for i in index if i < plan.kept]
        alone = sum(1 for i in index if plan.jobs[i].device_use == "exclusive")
        ends = (
            f", its last ends at {(plan.startup_s + plan.ends[kept[-1]]) / 60:.1f} min"
            if kept
            else ""
        )
        lines.append(
            f"phase {phase + 1}, {name}: {len(index)} jobs ({alone} exclusive), "
            f"{len(kept)} fit{ends}"
        )
        for i in index[:examples]:
            lines.append(f"    {i + 1:>5}. {plan.jobs[i].id}")
    lines.append(
        f"fits: {plan.kept} of {len(plan.jobs)} jobs, est. {plan.estimated_s / 60:.1f} min"
        + ("" if plan.budget_s is None else f" of {plan.budget_s / 60:.1f}")
    )
    if plan.left:
        first = plan.left[0]
        per_phase = [sum(1 for j in plan.left if phase_of(j) == p) for p in range(len(PHASES))]
        lines.append(
            f"left for the next call (--resume): {len(plan.left)} jobs "
            f"({', '.join(f'phase {p + 1}: {n}' for p, n in enumerate(per_phase) if n)}), "
            f"from {first.id}"
        )
    else:
        lines.append("left for the next call: nothing")
    return lines
