"""Jobs: entry x variant x cell x trial, with stable ids, filters and shards."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.entries import Entry, Variant
from harness.matrix import Cell, Expansion
from harness.records import RecordKey

__all__ = ["Job", "NotApplicable", "Plan", "make_plan", "parse_shard"]


@dataclass(frozen=True)
class Job:
    entry: Entry
    variant: Variant
    cell: Cell
    trial: int

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


def parse_shard(text: str) -> tuple[int, int]:
    """ "K/N" (1-based) -> (K, N); raises ValueError with what is wrong."""
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError as exc:
        raise ValueError(f"--shard must look like K/N (e.g. 2/4), got {text!r}") from exc
    if not 1 <= k <= n:
        raise ValueError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def _match(value: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)


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

    Shards split by environment (environment i goes to shard i mod N), so that each CI job
    builds only its own environments; with fewer environments than shards, by job.
    """
    envs = [e for e in expansion.environments if _match(e.id, env_filter)]
    k, n = shard
    by_env = len(envs) >= n
    jobs: list[Job] = []
    skipped: list[NotApplicable] = []
    entries = [e for e in entries if _match(e.id, entry_filter)]
    for env_index, env in enumerate(envs):
        if by_env and env_index % n != k - 1:
            continue
        for cell in expansion.cells:
            if cell.env != env or not _match(cell.id, cell_filter):
                continue
            for entry in entries:
                for variant in entry.variants:
                    if not _match(variant.name, variant_filter):
                        continue
                    if cell.device not in variant.devices:
                        skipped.append(
                            NotApplicable(
                                entry.id,
                                variant.name,
                                cell.id,
                                f"variant runs on {', '.join(variant.devices)} only",
                            )
                        )
                        continue
                    if cell.precision not in variant.precisions:
                        skipped.append(
                            NotApplicable(
                                entry.id,
                                variant.name,
                                cell.id,
                                f"variant is defined for {', '.join(variant.precisions)} only",
                            )
                        )
                        continue
                    for trial in range(expansion.trials):
                        jobs.append(Job(entry, variant, cell, trial))
    if not by_env:
        jobs = [j for i, j in enumerate(jobs) if i % n == k - 1]
    return Plan(tuple(jobs), tuple(skipped))
