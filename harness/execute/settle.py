"""Extra trials that settle questions (``run --settle SECONDS``).

After the plan's jobs, within the seconds given (and within what is left of ``--budget``),
extra trials go, a round at a time, one more trial per target:
1. to flaky cells of the run: a cell (entry, variant, cell) whose runs disagree on whether
   they hold what the variant stands for (``holds_as_documented``), until its failure rate's
   95% interval lies within 5%..95% (flaky, decided) or it has ``MAX_RUNS`` runs;
2. to the cells of claims whose interval still straddles the decision: a claim about one
   variant (a workaround's success rate, a dead end's failure rate, ...) whose advice (or,
   for a claim without one, its verdict) is inconclusive gets a trial in each of the run's
   cells of that variant where the entry's baseline reproduced, until the claim is decided
   (re-aggregated after each round, as the report aggregates) or a cell has ``MAX_RUNS``.
Rounds stop when nothing is open or the next round's estimated time (the stored durations,
harness/execute/budget.py) does not fit. Plain runs (no ``--settle``) run the plan's trials
only. What was settled, and by how many runs, is written to
``results/settled/<night>-<machine>.json`` and said on the terminal; the nightly's snapshot
lists the night's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.aggregate.stats import wilson
from harness.execute.plan import Job
from harness.outcomes import Outcome, holds_as_documented
from harness.store.records import Record

__all__ = [
    "FLAKY_HIGH",
    "FLAKY_LOW",
    "MAX_RUNS",
    "Question",
    "flaky_cells",
    "is_open",
    "next_round",
    "question_cells",
]

FLAKY_LOW, FLAKY_HIGH = 0.05, 0.95
MAX_RUNS = 30  # a cell's runs (its machine's trials) beyond which no extra trial goes to it

CellId = tuple[str, str, str]  # entry, variant, cell


@dataclass(frozen=True)
class Question:
    """A claim about one variant whose answer is still inconclusive."""

    entry: str
    claim: str
    subject: str  # the variant
    label: str  # the verdict in words when it was asked


def is_open(verdict: Any) -> bool:
    """A verdict whose interval straddles the decision: its advice inconclusive, or (a claim
    without advice) its verdict."""
    answer = verdict.advice or verdict.verdict
    return bool(verdict.subject) and answer == "inconclusive"


def _judged(records: Iterable[Record]) -> dict[CellId, list[bool]]:
    out: dict[CellId, list[bool]] = {}
    for r in records:
        held = holds_as_documented(r.kind, r.outcome)
        if held is not None:
            out.setdefault((r.entry, r.variant, r.cell), []).append(held)
    return out


def flaky_cells(records: Iterable[Record], planned: Iterable[CellId]) -> list[CellId]:
    """The planned cells whose runs disagree and are not decided yet, in plan order."""
    judged = _judged(records)
    out = []
    for cid in planned:
        runs = judged.get(cid, [])
        failed = runs.count(False)
        if not failed or failed == len(runs) or len(runs) >= MAX_RUNS:
            continue
        low, high = wilson(failed, len(runs)) or (0.0, 1.0)
        if not (low > FLAKY_LOW and high < FLAKY_HIGH):
            out.append(cid)
    return out


def question_cells(
    records: Iterable[Record], question: Question, planned: Iterable[CellId]
) -> list[CellId]:
    """The planned cells of the question's variant where the entry's baseline reproduced
    and that have fewer than MAX_RUNS runs."""
    records = list(records)
    reproducing = {
        r.cell
        for r in records
        if r.entry == question.entry and r.kind == "baseline" and r.outcome is Outcome.REPRODUCED
    }
    runs = _judged(records)
    return [
        cid
        for cid in planned
        if cid[0] == question.entry
        and cid[1] == question.subject
        and cid[2] in reproducing
        and len(runs.get(cid, [])) < MAX_RUNS
    ]


def next_round(
    planned: Mapping[CellId, Job],
    records: Sequence[Record],
    questions: Sequence[Question],
    machine: Callable[[Record], bool],
) -> tuple[list[Job], dict[CellId, str]]:
    """One more trial per open target, flaky cells first, each numbered after the
    machine's last trial of that cell; and why each cell is a target."""
    why: dict[CellId, str] = {}
    for cid in flaky_cells(records, planned):
        why[cid] = "flaky cell"
    for q in questions:
        for cid in question_cells(records, q, planned):
            why.setdefault(cid, f"claim {q.claim!r} ({q.label})")
    last: dict[CellId, int] = {}
    for r in records:
        if machine(r):
            cid = (r.entry, r.variant, r.cell)
            last[cid] = max(last.get(cid, -1), r.trial)
    jobs = [dataclasses.replace(planned[cid], trial=last.get(cid, -1) + 1) for cid in why]
    return jobs, why


def settled_json(result: Mapping[str, Any]) -> str:
    return json.dumps(result, indent=1) + "\n"
