"""Jobs: entry x variant x cell x trial, with stable ids, filters and shards.

Shards keep an environment's cells together (a CI job builds only its own environments)
and are balanced by cost: ``balance`` gives the costliest environment first to the shard
with the least so far (longest processing time first). ``--shard K/N`` costs each job 1 (a
pure function of the plan: every machine computes the same shards); ``plan --github``
costs jobs by their stored durations (see fanout.py) and hands each CI job its list of
environments, so that no runner has to recompute the split.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.config import out_of_range
from harness.spec.entries import Entry, Variant
from harness.spec.matrix import Cell, Environment, Expansion, version_key
from harness.store.records import RecordKey

__all__ = [
    "Job",
    "NotApplicable",
    "Plan",
    "Shard",
    "balance",
    "explain_no_job",
    "make_plan",
    "one_per_torch",
    "parse_shard",
    "unmatched_filter",
]


@dataclass(frozen=True)
class Job:
    entry: Entry
    variant: Variant
    cell: Cell  # the cell the job's record answers for
    trial: int

    @property
    def requested(self) -> tuple[str, ...]:
        """The variant's (and entry's) requirements: its version advice, as asked."""
        return self.entry.requirements_for(self.variant)

    @functools.cached_property
    def env(self) -> Environment:
        """Where the job runs: the cell's environment where it already satisfies what the
        variant requests, or one derived from it for the rest (version advice, as pip
        follows it: Environment.with_requires). Cells whose requests resolve alike share
        one derived environment."""
        return self.cell.env.with_requires(self.requested, lightning=self.entry.uses_lightning)

    @property
    def device_use(self) -> str:
        """What it takes of the GPU: "none" on a CPU cell, else its variant's ``gpu``
        ("shared" or "exclusive"; the scheduler's device tokens)."""
        return "none" if self.cell.device != "cuda" else self.variant.gpu

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.entry.id, self.variant.name, self.cell.id, self.trial)

    @property
    def id(self) -> str:
        return self.key.id


@dataclass(frozen=True)
class NotApplicable:
    entry: str
    variant: str
    cell: str
    reason: str


@dataclass(frozen=True)
class Plan:
    jobs: tuple[Job, ...]
    not_applicable: tuple[NotApplicable, ...]
    # the entries whose reproducer imports no lightning, and the one environment per torch
    # release they run in (see ``one_per_torch``)
    lightning_free: tuple[str, ...] = ()
    lightning_free_envs: tuple[str, ...] = ()
    # the jobs a profile that builds only its rows (matrix.yaml ``derived: false``) leaves
    # out: each needs an environment of its own (``requires:``)
    left_out: tuple[NotApplicable, ...] = ()


def parse_shard(text: str) -> tuple[int, int]:
    """ "K/N" (1-based) -> (K, N); raises ValueError with what is wrong."""
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError as exc:
        raise ValueError(f"--shard must look like K/N (e.g. 2/4), got {text!r}") from exc
    if not 1 <= k <= n:
        raise ValueError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    problem = out_of_range("shards", n)
    if problem:
        raise ValueError(f"--shard K/N: N {problem}")
    return k, n


@dataclass(frozen=True)
class Shard:
    """One share of a plan: whole environments, their jobs and what they are expected to cost."""

    index: int  # 1-based
    envs: tuple[str, ...]  # environment ids, in plan order
    jobs: tuple[Job, ...]
    cost: float  # the sum of its jobs' costs (seconds where durations are known)


def balance(
    jobs: Sequence[Job], n: int, cost: Callable[[Job], float] = lambda job: 1.0
) -> list[Shard]:
    """Split ``jobs`` into ``n`` shards of whole environments, balanced by ``cost``.

    The costliest environment goes first, each to the shard with the least cost so far
    (ties: the lower index; environments of equal cost in plan order). Deterministic.
    Shards with no environment (fewer environments than shards) are returned empty.
    """
    by_env: dict[str, list[Job]] = {}
    for job in jobs:
        by_env.setdefault(job.cell.env.id, []).append(job)
    env_cost = {env: sum(cost(j) for j in js) for env, js in by_env.items()}
    order = list(by_env)
    loads = [0.0] * n
    chosen: list[set[str]] = [set() for _ in range(n)]
    for env in sorted(order, key=lambda e: (-env_cost[e], order.index(e))):
        k = min(range(n), key=lambda i: (loads[i], i))
        loads[k] += env_cost[env]
        chosen[k].add(env)
    return [
        Shard(
            index=k + 1,
            envs=tuple(e for e in order if e in chosen[k]),
            jobs=tuple(j for j in jobs if j.cell.env.id in chosen[k]),
            cost=loads[k],
        )
        for k in range(n)
    ]


def _match(value: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def one_per_torch(envs: Iterable[Environment]) -> list[Environment]:
    """For a reproducer that imports no lightning, the lightning of an environment plays
    no part in what it measures: of the environments given, one per torch release and
    python runs it, the one with the newest lightning. Deterministic, and chosen among the
    environments the filters kept, so ``--env`` can still pick any of them."""
    best: dict[tuple[str, str, str], Environment] = {}
    for env in envs:
        key = (env.python, env.torch, env.interpreter)
        held = best.get(key)
        if held is None or version_key(env.lightning) > version_key(held.lightning):
            best[key] = env
    return sorted(best.values())


def _not_applicable(variant: Variant, cell: Cell) -> str:
    """Why ``variant`` does not run in ``cell`` ("" where it does)."""
    if not variant.written:
        return "not written yet (repro.py maps it to None in VARIANTS)"
    if cell.device not in variant.devices:
        return f"variant runs on {', '.join(variant.devices)} only"
    if cell.precision not in variant.precisions:
        return f"variant is defined for {', '.join(variant.precisions)} only"
    return ""


def make_plan(
    expansion: Expansion,
    entries: Iterable[Entry],
    *,
    entry_filter: Sequence[str] = (),
    variant_filter: Sequence[str] = (),
    env_filter: Sequence[str] = (),
    cell_filter: Sequence[str] = (),
    shard: tuple[int, int] = (1, 1),
) -> Plan:
    """Every job of the profile, in a stable order: environment, cell, entry, variant, trial.

    ``shard`` (K, N): the K-th of N shards made by ``balance`` with one unit per job, so
    each CI job builds only its own environments; with fewer environments than shards
    (nothing to balance), every N-th job.

    An entry whose reproducer imports no lightning (``Entry.uses_lightning``) runs in one
    environment per torch release and python (``one_per_torch``), not in every
    lightning's.
    """
    envs = [e for e in expansion.environments if _match(e.id, env_filter)]
    k, n = shard
    jobs: list[Job] = []
    skipped: list[NotApplicable] = []
    entries = [e for e in entries if _match(e.id, entry_filter)]
    with_cells = {c.env.id for c in expansion.cells if _match(c.id, cell_filter)}
    chosen = {e.id for e in one_per_torch(e for e in envs if e.id in with_cells)}
    lightning_free = tuple(e.id for e in entries if not e.uses_lightning)
    left_out: list[NotApplicable] = []
    for env in envs:
        for cell in expansion.cells:
            if cell.env != env or not _match(cell.id, cell_filter):
                continue
            for entry in entries:
                if not entry.uses_lightning and env.id not in chosen:
                    continue
                for variant in entry.variants:
                    if not _match(variant.name, variant_filter):
                        continue
                    why = _not_applicable(variant, cell)
                    if why:
                        skipped.append(NotApplicable(entry.id, variant.name, cell.id, why))
                        continue
                    first = Job(entry, variant, cell, 0)
                    if not expansion.derived and first.env != cell.env:
                        left_out.append(
                            NotApplicable(
                                entry.id,
                                variant.name,
                                cell.id,
                                f"needs an environment of its own (requires: "
                                f"{', '.join(first.requested)}); profile "
                                f"{expansion.profile!r} builds only its rows",
                            )
                        )
                        continue
                    for trial in range(expansion.trials):
                        jobs.append(first if trial == 0 else Job(entry, variant, cell, trial))
    if n > 1:
        if len({j.cell.env.id for j in jobs}) >= n:
            jobs = list(balance(jobs, n)[k - 1].jobs)
        else:
            jobs = [j for i, j in enumerate(jobs) if i % n == k - 1]
    return Plan(
        tuple(jobs),
        tuple(skipped),
        lightning_free,
        tuple(e for e in (env.id for env in envs) if e in chosen) if lightning_free else (),
        tuple(left_out),
    )


def unmatched_filter(
    expansion: Expansion,
    entries: Sequence[Entry],
    *,
    entry_filter: Sequence[str] = (),
    variant_filter: Sequence[str] = (),
    env_filter: Sequence[str] = (),
    cell_filter: Sequence[str] = (),
    other_profiles: Mapping[str, Expansion] | None = None,
) -> str:
    """The first filter pattern that matches nothing of the profile (and, for an
    environment or cell of another profile, which profile has it); "" where each matches.
    A filter that names what the profile lacks (an environment a bisect built) is an
    error even where the other patterns select jobs."""
    profile = expansion.profile
    chosen = [e for e in entries if _match(e.id, entry_filter)]
    axes: list[tuple[str, Sequence[str], list[str], str, Callable[[Expansion], list[str]]]] = [
        ("--entry", entry_filter, [e.id for e in entries], "entry", lambda x: []),
        (
            "--variant",
            variant_filter,
            sorted({v.name for e in chosen for v in e.variants}),
            "variant of the entries selected",
            lambda x: [],
        ),
        (
            "--env",
            env_filter,
            [e.id for e in expansion.environments],
            f"environment of profile {profile!r}",
            lambda x: [e.id for e in x.environments],
        ),
        (
            "--cell",
            cell_filter,
            [c.id for c in expansion.cells],
            f"cell of profile {profile!r}",
            lambda x: [c.id for c in x.cells],
        ),
    ]
    for flag, patterns, universe, what, of_profile in axes:
        for pattern in patterns:
            if any(fnmatch.fnmatchcase(u, pattern) for u in universe):
                continue
            elsewhere = sorted(
                name
                for name, other in (other_profiles or {}).items()
                if name != profile
                and any(fnmatch.fnmatchcase(u, pattern) for u in of_profile(other))
            )
            hint = (
                f"; profile(s) {', '.join(elsewhere)} have it: add --profile {elsewhere[0]}"
                if elsewhere
                else f"; there are {len(universe)}, e.g. {', '.join(universe[:3])}"
                if universe
                else ""
            )
            return f"{flag} {pattern!r} matches no {what}{hint}"
    return ""


def explain_no_job(
    expansion: Expansion,
    entries: Sequence[Entry],
    *,
    entry_filter: Sequence[str] = (),
    variant_filter: Sequence[str] = (),
    env_filter: Sequence[str] = (),
    cell_filter: Sequence[str] = (),
    other_profiles: Mapping[str, Expansion] | None = None,
    not_applicable: Sequence[NotApplicable] = (),
) -> str:
    """Why the filters select no job of the profile: the first filter that matches
    nothing (``unmatched_filter``), or the pairs they select together and why none applies."""
    unmatched = unmatched_filter(
        expansion,
        entries,
        entry_filter=entry_filter,
        variant_filter=variant_filter,
        env_filter=env_filter,
        cell_filter=cell_filter,
        other_profiles=other_profiles,
    )
    if unmatched:
        return unmatched
    if not_applicable:
        first = not_applicable[0]
        return (
            f"the filters select {len(not_applicable)} (variant, cell) pair(s), none "
            f"applicable: {first.entry}::{first.variant} on {first.cell}: {first.reason}"
        )
    return "the filters match, but select no job together; widen one of them"
