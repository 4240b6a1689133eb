"""The nightly fan-out: a plan split into CI jobs, balanced by what its jobs cost.

``python -m harness plan --github --profile cpu --shards 4`` prints the GitHub Actions job
matrix (``{"include": [...]}``, one line, for ``$GITHUB_OUTPUT``): one job per shard, each
with its machine name, its profile and its environments, which it runs with one ``--env``
each (see .github/workflows/nightly.yml). Without ``--github`` it prints the same split for
a reader.

A job's cost is the median duration of the stored records of the same entry, variant and
environment (every machine's newest), else of the same entry and variant in any
environment, else the median of all stored durations; with no stored duration at all,
every job costs 1 and the shards are balanced by job count. Environment builds are not in
the records and not counted: each shard builds only its own environments.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import InputError
from harness.execute.plan import Job, Shard, balance
from harness.execute.steps import RunState, Step, load_inputs, plan_jobs
from harness.outcomes import Outcome
from harness.store.jsonl import Store, latest
from harness.store.records import Record

__all__ = [
    "GITHUB_MATRIX_LIMIT",
    "PLAN_STEPS",
    "FanOut",
    "describe_fan_out",
    "fan_out",
    "github_matrix",
    "github_matrix_json",
    "job_cost",
    "show_fan_out",
]

# GitHub Actions runs at most 256 jobs from one matrix
GITHUB_MATRIX_LIMIT = 256

# records whose duration says nothing about the job's (nothing ran, or it ran out of time
# under another limit)
_NOT_TIMED = {Outcome.SKIPPED.value, Outcome.ENV_FAILED.value}


@dataclass(frozen=True)
class FanOut:
    profile: str
    prefix: str  # machine names are "<prefix>-<shard>"
    shards: tuple[Shard, ...]  # the non-empty ones, renumbered 1..n
    timed: bool  # costs are seconds from stored durations (else: job counts)


def job_cost(records: Iterable[Record]) -> tuple[Callable[[Job], float], bool]:
    """(cost of a job, whether any stored duration backs it)."""
    by_env: dict[tuple[str, str, str], list[float]] = {}
    by_variant: dict[tuple[str, str], list[float]] = {}
    every: list[float] = []
    for r in records:
        if r.outcome.value in _NOT_TIMED or not r.duration_s > 0:
            continue
        by_env.setdefault((r.entry, r.variant, r.env), []).append(r.duration_s)
        by_variant.setdefault((r.entry, r.variant), []).append(r.duration_s)
        every.append(r.duration_s)
    if not every:
        return (lambda job: 1.0), False
    env_median = {k: statistics.median(v) for k, v in by_env.items()}
    variant_median = {k: statistics.median(v) for k, v in by_variant.items()}
    overall = statistics.median(every)

    def cost(job: Job) -> float:
        key = (job.entry.id, job.variant.name, job.cell.env.id)
        if key in env_median:
            return env_median[key]
        return variant_median.get(key[:2], overall)

    return cost, True


def fan_out(
    jobs: Sequence[Job], shards: int, records: Iterable[Record], *, profile: str, prefix: str
) -> FanOut:
    cost, timed = job_cost(records)
    made = [s for s in balance(jobs, shards, cost) if s.envs]
    renumbered = tuple(
        Shard(index=i, envs=s.envs, jobs=s.jobs, cost=s.cost) for i, s in enumerate(made, 1)
    )
    return FanOut(profile=profile, prefix=prefix, shards=renumbered, timed=timed)


def github_matrix(plan: FanOut) -> dict[str, Any]:
    """The ``strategy.matrix`` of the shard jobs: one ``include`` item per shard."""
    return {
        "include": [
            {
                "shard": s.index,
                "machine": f"{plan.prefix}-{s.index}",
                "profile": plan.profile,
                "envs": " ".join(s.envs),
                "jobs": len(s.jobs),
                "estimated_s": round(s.cost) if plan.timed else None,
            }
            for s in plan.shards
        ]
    }


def github_matrix_json(plan: FanOut) -> str:
    return json.dumps(github_matrix(plan), separators=(",", ":"))


def describe_fan_out(plan: FanOut) -> list[str]:
    total = sum(len(s.jobs) for s in plan.shards)
    unit = "estimated from stored durations" if plan.timed else "no stored durations: by job count"
    lines = [
        f"profile {plan.profile!r}: {total} jobs in {len(plan.shards)} shard(s), "
        f"balanced by cost ({unit})"
    ]
    for s in plan.shards:
        cost = f"~{s.cost:.0f} s" if plan.timed else f"{s.cost:.0f} jobs"
        lines.append(
            f"  {plan.prefix}-{s.index}: {len(s.envs)} environment(s), {len(s.jobs)} jobs, "
            f"{cost}: {' '.join(s.envs)}"
        )
    return lines


def show_fan_out(state: RunState) -> int:
    """The last step of ``plan``: the split, for a reader or (``--github``) as a job matrix."""
    cfg = state.config
    assert state.plan is not None and state.expansion is not None
    if cfg.github and cfg.fan_out_shards > GITHUB_MATRIX_LIMIT:
        raise InputError(
            f"--shards {cfg.fan_out_shards}: a GitHub Actions matrix runs at most "
            f"{GITHUB_MATRIX_LIMIT} jobs"
        )
    # every machine's newest records: what the jobs took where they last ran
    stored = latest(Store(cfg.records_dir).load().records)
    plan = fan_out(
        state.plan.jobs,
        cfg.fan_out_shards,
        stored,
        profile=state.expansion.profile,
        prefix=cfg.machine_prefix or f"ci-{state.expansion.profile}",
    )
    if cfg.github:
        sys.stdout.write(github_matrix_json(plan) + "\n")
    else:
        for line in describe_fan_out(plan):
            state.console.print(line, markup=False)
    return 0


PLAN_STEPS: tuple[Step, ...] = (load_inputs, plan_jobs, show_fan_out)
