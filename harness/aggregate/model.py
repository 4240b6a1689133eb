"""What the aggregation produces: frozen types per cell, variant, entry and machine, the
verdict vocabulary, and their JSON form (``to_dict``). No rules live here."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from packaging.version import InvalidVersion, Version

from harness.aggregate.stats import Rate
from harness.domain import KINDS, parse_env_id, pattern_text
from harness.outcomes import GRADES, NOT_COUNTED, Outcome

__all__ = [
    "ADVICE",
    "CONFIRMED",
    "CONTRADICTED",
    "FAILS_OTHERWISE",
    "FIGURES",
    "FLAKY",
    "GRADE_ANSWERS",
    "HOLDS",
    "INCONCLUSIVE",
    "KIND_ORDER",
    "METRIC",
    "NOT_AS_DOCUMENTED",
    "NOT_MEASURABLE",
    "NOT_STATED",
    "OUTCOME_ORDER",
    "OVERSTATED",
    "CONSISTENT",
    "DEPENDS",
    "VERDICTS",
    "WRONG",
    "Aggregates",
    "CellKey",
    "CellValue",
    "EntryAggregate",
    "EnvInfo",
    "Failure",
    "Machine",
    "MessageSeen",
    "NotCounted",
    "ReproRange",
    "Slice",
    "Texts",
    "Trials",
    "VariantAggregate",
    "Verdict",
    "cell_value",
    "cell_value_of",
    "env_info",
    "slice_id",
]

CONFIRMED = "confirmed"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_MEASURABLE = "not measurable"
# a dead end that fails, though not as its document says (harder, another error): the
# advice to avoid it holds, its stated reason does not
NOT_AS_DOCUMENTED = "not as documented"
# a claim that holds in some releases and not in others, the two sides apart at one change
# between two measured releases: which side a reader is on decides what to do
DEPENDS = "depends on the release"
VERDICTS = (CONFIRMED, CONTRADICTED, NOT_AS_DOCUMENTED, DEPENDS, INCONCLUSIVE, NOT_MEASURABLE)
# a rate claim's two answers: does the advice hold, is the figure right
# (docs/reference/outcomes-and-verdicts.md)
HOLDS = "holds"
WRONG = "wrong"
FAILS_OTHERWISE = "fails otherwise"  # a dead end's advice: avoid it, for another reason
ADVICE = (HOLDS, WRONG, FAILS_OTHERWISE, DEPENDS, INCONCLUSIVE, NOT_MEASURABLE)
# a stated rate is a population figure: scenarios can show it too high, never too low, so a
# figure the scenarios do not put below it is "consistent", never "confirmed" or "understated"
CONSISTENT = "consistent"
OVERSTATED = "overstated"
NOT_STATED = "not stated"
FIGURES = (CONSISTENT, OVERSTATED, DEPENDS, INCONCLUSIVE, NOT_STATED, NOT_MEASURABLE)
# a documented message's grade (harness.outcomes.Grade), or not measurable without a run
GRADE_ANSWERS = (*(g.value for g in GRADES), NOT_MEASURABLE)
FLAKY = "flaky"

OUTCOME_ORDER: tuple[Outcome, ...] = tuple(Outcome)
_VALUE_RANK = {o.value: i for i, o in enumerate(OUTCOME_ORDER)}
_NOT_COUNTED_VALUES = frozenset(o.value for o in NOT_COUNTED)
KIND_ORDER = KINDS
METRIC = {
    "baseline": "reproduction rate",
    "workaround": "success rate",
    "dead_end": "failure rate",
    "control": "ok rate",
}


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _public(v: Version | None) -> Version | None:
    return None if v is None else Version(v.public)


@dataclass(frozen=True)
class EnvInfo:
    id: str
    python: str  # as installed where known, else as named in the id
    torch: str
    lightning: str

    @functools.cached_property  # works on a frozen dataclass: it writes __dict__ directly
    def sort_key(self) -> tuple[Any, ...]:
        def key(text: str) -> tuple[int, Any]:
            v = _public(_version(text))
            return (0, v) if v is not None else (1, text)

        return (key(self.torch), key(self.lightning), key(self.python), self.id)

    def label(self) -> str:
        """Short column label, local version labels shown: 'torch 1.12.1+cu102 / L 2.1.4'."""
        parts = [f"torch {self.torch or '?'}"]
        if self.lightning:
            parts.append(f"L {self.lightning}")
        if self.python:
            parts.append(f"py{self.python}")
        return " / ".join(parts)

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "python": self.python,
            "torch": self.torch,
            "lightning": self.lightning,
        }


def env_info(env: str, versions: Mapping[str, str] | None = None) -> EnvInfo:
    """Versions really installed where a record says so, else those named in the env id."""
    named = parse_env_id(env)
    versions = versions or {}
    return EnvInfo(
        id=env,
        python=str(versions.get("python") or named.python),
        torch=str(versions.get("torch") or named.torch),
        lightning=str(versions.get("lightning") or named.lightning),
    )


CellKey = tuple[str, str, str, str]  # variant, env, device, precision
Slice = tuple[str, str]  # device, precision


def slice_id(s: Slice) -> str:
    return f"{s[0]}-{s[1]}"


@dataclass(frozen=True)
class CellValue:
    status: str  # an Outcome value, or "flaky"
    counts: tuple[tuple[str, int], ...]  # (outcome value, trials), in OUTCOME_ORDER

    @functools.cached_property
    def trials(self) -> int:
        # (cached: a value is shared by the many cells that counted the same, read for each)
        return sum(c for _, c in self.counts)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "counts": dict(self.counts)}


_SINGLE = {o: CellValue(o.value, ((o.value, 1),)) for o in Outcome}


def cell_value(outcomes: Iterable[Outcome]) -> CellValue:
    if isinstance(outcomes, list) and len(outcomes) == 1:
        return _SINGLE[outcomes[0]]  # the common case: one trial, a shared value
    counts = Counter(o.value for o in outcomes)
    if not counts:
        raise ValueError("a cell needs at least one trial")
    return cell_value_of(counts)


def cell_value_of(counts: Mapping[str, int]) -> CellValue:
    """The cell of trials counted per outcome value (zero counts allowed)."""
    ordered = tuple((o.value, counts[o.value]) for o in OUTCOME_ORDER if counts.get(o.value))
    if not ordered:
        raise ValueError("a cell needs at least one trial")
    counted = [o for o, _ in ordered if o not in _NOT_COUNTED_VALUES]
    if len(counted) > 1:
        status = FLAKY
    elif counted:
        status = counted[0]
    else:  # only unapplicable trials: show the most frequent (first in order on ties)
        status = max(ordered, key=lambda oc: (oc[1], -_VALUE_RANK[oc[0]]))[0]
    return CellValue(status, ordered)


@dataclass(frozen=True)
class MessageSeen:
    type: str
    message: str
    count: int  # the scenarios (cells) whose runs raised it
    outcomes: tuple[str, ...]
    envs: tuple[str, ...]
    # how it reads against the documented message (a Grade's value; "" for a variant whose
    # runs are not read so: workarounds, controls)
    grade: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "count": self.count,
            "outcomes": list(self.outcomes),
            "envs": list(self.envs),
            "grade": self.grade or None,
        }


@dataclass(frozen=True)
class Failure:
    """Counted runs of a variant that ended one way: an exception (its type and message)
    or, without one, the outcome and its reason (wrong_result, crashed, timeout)."""

    outcome: str
    text: str
    count: int
    # runs of a dead end that fail as documented though their outcome does not say so: its
    # declared silent failure (fails_as: wrong_result), or the documented error read at its
    # grade (other_error, variable-parts or reworded); never "seen instead"
    as_documented: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "text": self.text,
            "count": self.count,
            "as_documented": self.as_documented,
        }


@dataclass(frozen=True)
class NotCounted:
    outcome: str
    reason: str
    count: int
    envs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "count": self.count,
            "envs": list(self.envs),
        }


@dataclass(frozen=True)
class ReproRange:
    """Where a baseline reproduces, in environment order, for one slice (or all: '*')."""

    slice: str  # "cpu-fp16" or "*"
    first: str | None  # first env where reproduced (measured "Introduced")
    last: str | None  # last env where reproduced (measured "Deprecated" bound)
    newest: str | None  # newest env with applicable runs
    in_newest: bool | None  # reproduces in the newest measured env
    measured: tuple[str, ...]  # envs with applicable runs, in order
    reproduced: tuple[str, ...]  # envs with at least one reproduced run, in order

    @property
    def gaps(self) -> tuple[str, ...]:
        """Measured envs between first and last where it did not reproduce."""
        if self.first is None or self.last is None:
            return ()
        i, j = self.measured.index(self.first), self.measured.index(self.last)
        rep = set(self.reproduced)
        return tuple(e for e in self.measured[i : j + 1] if e not in rep)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "first": self.first,
            "last": self.last,
            "newest": self.newest,
            "in_newest": self.in_newest,
            "measured": list(self.measured),
            "reproduced": list(self.reproduced),
            "gaps": list(self.gaps),
        }


@dataclass(frozen=True)
class VariantAggregate:
    name: str
    kind: str
    description: str
    claim_ref: str | None
    claimed_rate: float | None
    reading: str | None
    metric: str
    overall: Rate
    by_slice: tuple[tuple[str, Rate], ...]  # (slice id, rate), slices in order
    ranges: tuple[ReproRange, ...]  # baselines only: '*' first, then per slice
    messages: tuple[MessageSeen, ...]
    not_counted: tuple[NotCounted, ...]
    runs: int
    # the metric over every applicable run, ignoring the reproducing-cell rule: what a
    # workaround did where the documented error never appeared (shown, never judged)
    anywhere: Rate = field(default_factory=lambda: Rate.of(0, 0))
    # the runs (of those counted in ``overall``) that raised the variant's own expected
    # error, never the documented one: "related" (DESIGN.md, "Documented vs related")
    related: Rate = field(default_factory=lambda: Rate.of(0, 0))
    ok: Rate = field(default_factory=lambda: Rate.of(0, 0))  # ok runs, of the same n
    # a dead end's silent documented failure (entry.yaml fails_as: postconditions), and the
    # runs (of those counted in ``overall``) that ended so: wrong_result with one of them failed
    fails_as: tuple[str, ...] = ()
    silent: Rate = field(default_factory=lambda: Rate.of(0, 0))
    # the runs counted in ``overall`` that were not ok, by how they ended, most first
    failures: tuple[Failure, ...] = ()
    # baselines: the applicable runs that show the documented error at a grade that reads
    # as it (verbatim, variable-parts, reworded), of all applicable runs; the applicable
    # runs per grade (in GRADES order); per environment (in version order): (env, runs that
    # show it, applicable runs)
    shown: Rate = field(default_factory=lambda: Rate.of(0, 0))
    grades: tuple[tuple[str, int], ...] = ()
    env_shows: tuple[tuple[str, int, int], ...] = ()
    # per environment (in version order, those with counted runs): (env, k, n of
    # ``overall``, k, n of ``anywhere``, the ok runs of ``overall``'s n); the rates of a set
    # of environments are their sums
    by_env: tuple[tuple[str, int, int, int, int, int], ...] = ()
    # version advice: the requirements the variant adds to its cells' (entry.yaml
    # ``requires``), and what they changed where it ran, one text per package over the
    # environments ("numpy 2.4.6 → 1.26.4", "torch 2.1.2 … 2.13.0 (14) → 2.0.1")
    requires: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    # what its claim means (entry.yaml claim: kind, unmeasured, condition, within): the
    # kind of the documented failure or promise, and for a dead end the kind its runs can
    # show as documented (None: they cannot show it)
    claim_kind: str | None = None
    measured_kind: str | None = None
    unmeasured: str | None = None
    condition: str | None = None
    within: str | None = None
    # the cells whose runs ``overall`` counts, (env, device, precision): where a baseline
    # reproduces, for workarounds and dead ends (the corrections' outcome lines, one per
    # counted run, walk them; not in the JSON)
    scope: frozenset[tuple[str, str, str]] = frozenset()
    # the environments where a counted scenario's trials disagree (not in the JSON): a
    # release holding one mixes hits and misses, and parts no claim
    flaky_envs: frozenset[str] = frozenset()

    @property
    def failed_otherwise(self) -> int:
        """Counted runs that were neither ok nor the failure the variant's metric counts:
        for a dead end, a failure for another reason than the documented one."""
        return self.overall.n - self.ok.k - (0 if self.kind == "workaround" else self.overall.k)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "claim_ref": self.claim_ref,
            "claimed_rate": self.claimed_rate,
            "reading": self.reading,
            "metric": self.metric,
            "runs": self.runs,
            "overall": self.overall.to_dict(),
            "by_slice": {s: r.to_dict() for s, r in self.by_slice},
            "ranges": [r.to_dict() for r in self.ranges],
            "messages": [m.to_dict() for m in self.messages],
            "not_counted": [m.to_dict() for m in self.not_counted],
            "anywhere": self.anywhere.to_dict(),
            "related": self.related.to_dict(),
            "ok": self.ok.to_dict(),
            "fails_as": list(self.fails_as),
            "silent": self.silent.to_dict(),
            "failures": [f.to_dict() for f in self.failures],
            "shown": self.shown.to_dict(),
            "grades": dict(self.grades),
            "env_shows": [list(e) for e in self.env_shows],
            # what the claim means (workarounds and dead ends only)
            **(
                {
                    "claim_kind": self.claim_kind,
                    "measured_kind": self.measured_kind,
                    "unmeasured": self.unmeasured,
                    "condition": self.condition,
                    "within": self.within,
                }
                if self.claim_kind
                else {}
            ),
            # version advice only (the other variants' JSON stays as it was)
            **(
                {"requires": list(self.requires), "changed": list(self.changed)}
                if self.requires
                else {}
            ),
        }


@dataclass(frozen=True)
class Verdict:
    claim: str  # what the document says, e.g. "fix rate", "version table: torch>=1.10 (active)"
    subject: str  # the variant or spec it concerns ("" for the entry)
    claimed: str
    measured: str
    verdict: str  # one of VERDICTS: the one word that counts use
    why: str
    seen_instead: str = ""  # the most frequent message seen instead, where relevant
    n: int = 0  # applicable runs behind the verdict
    # a rate claim's two answers: one of ADVICE, one of FIGURES ("" on other claims)
    advice: str = ""
    figure: str = ""
    # the documented message's grade (one of GRADE_ANSWERS) on the message and on the
    # version rows read at it ("" on rate claims)
    grade: str = ""
    words: str = ""  # the verdict as the tables say it ("holds; figure understated: ...")

    @property
    def label(self) -> str:
        """The verdict in words: ``words`` where the rules wrote them, else 'inconclusive
        (n=2)' and the other verdicts as they are."""
        if self.words:
            return self.words
        return f"{self.verdict} (n={self.n})" if self.verdict == INCONCLUSIVE else self.verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "subject": self.subject,
            "claimed": self.claimed,
            "measured": self.measured,
            "verdict": self.verdict,
            "advice": self.advice or None,
            "figure": self.figure or None,
            "grade": self.grade or None,
            "label": self.label,
            "why": self.why,
            "seen_instead": self.seen_instead,
            "n": self.n,
        }


@dataclass(frozen=True)
class Machine:
    name: str  # the machine's name (--machine, else the host), with its id where names repeat
    machine_id: str
    host: str
    os: str
    cpu: str
    gpu: str
    driver: str
    cuda: str
    harness_version: str
    git_rev: str
    runs: int
    first: str  # earliest started_at
    last: str  # newest started_at

    FIELDS = ("host", "os", "cpu", "gpu", "driver", "cuda", "harness_version", "git_rev")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "machine_id": self.machine_id,
            "host": self.host,
            "os": self.os,
            "cpu": self.cpu,
            "gpu": self.gpu,
            "driver": self.driver,
            "cuda": self.cuda,
            "harness_version": self.harness_version,
            "git_rev": self.git_rev,
            "runs": self.runs,
            "first": self.first,
            "last": self.last,
        }


@dataclass(frozen=True, eq=False)
class Texts:
    """The texts that trials name, each once: ``texts[0]`` is ""; ``exceptions[x]``: the
    ids of exception ``x``'s type, message and frame (row 0: no exception); ``objects[o]``:
    a provenance (True) or versions (False) object, as stored."""

    texts: list[str]
    exceptions: np.ndarray
    objects: list[tuple[dict[str, str], bool]]


@dataclass(frozen=True, eq=False)
class Trials:
    """An entry's trials, one element each, in the page's order of its cells (slice,
    variant row, environment; in a cell by trial, start time, outcome, host, duration):
    the outcome (its index in OUTCOME_ORDER), the exception (a row of ``texts.exceptions``),
    the duration in seconds, the machine and versions (objects of ``texts.objects``), the
    reason and the start time (ids in ``texts.texts``), the trial number."""

    texts: Texts
    outcome: np.ndarray
    exception: np.ndarray
    duration_s: np.ndarray
    machine: np.ndarray
    versions: np.ndarray
    reason: np.ndarray
    started: np.ndarray
    trial: np.ndarray

    EMPTY: ClassVar[Trials]

    def __len__(self) -> int:
        return len(self.outcome)


Trials.EMPTY = Trials(
    Texts([""], np.zeros((1, 3), dtype=np.int64), []),
    *(np.zeros(0, dtype=np.float64 if i == 2 else np.int64) for i in range(8)),
)


@dataclass(frozen=True)
class EntryAggregate:
    id: str
    title: str
    signature_type: str
    signature_message: str
    document: str | None  # write-back target path, when the entry is known
    envs: tuple[EnvInfo, ...]  # in version order
    slices: tuple[Slice, ...]
    variants: tuple[VariantAggregate, ...]
    cells: Mapping[CellKey, CellValue]
    # the trials of every cell, for the page's data files
    trials: Trials = field(default_factory=lambda: Trials.EMPTY, repr=False, compare=False)
    verdicts: tuple[Verdict, ...] = ()
    machines: tuple[Machine, ...] = ()
    # cells measured on several machines: (machine label, its value) per machine; and the
    # cells among them where the machines disagree
    by_machine: Mapping[CellKey, tuple[tuple[str, CellValue], ...]] = field(default_factory=dict)
    disagree: frozenset[CellKey] = frozenset()
    n_runs: int = 0
    n_counted: int = 0
    newest: str = ""  # started_at of the newest record ("" if none carry one)
    # the verdicts in five or six plain sentences (harness/aggregate/bottomline.py)
    bottom_line: tuple[str, ...] = ()

    def variant(self, name: str) -> VariantAggregate:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def signature_text(self) -> str:
        """The documented message as a reader writes it, not as the pattern that matches it."""
        return pattern_text(self.signature_message)

    @property
    def harness_versions(self) -> tuple[str, ...]:
        return tuple(sorted({m.harness_version for m in self.machines if m.harness_version}))

    def to_dict(self) -> dict[str, Any]:
        # per variant and slice: statuses aligned with "environments" (null: not run), and
        # the trial counts of cells with more than one trial
        env_index = {e.id: i for i, e in enumerate(self.envs)}
        cells: dict[str, dict[str, dict[str, Any]]] = {}
        for v in self.variants:
            per: dict[str, dict[str, Any]] = {}
            for s in self.slices:
                per[slice_id(s)] = {"status": [None] * len(self.envs), "counts": {}}
            cells[v.name] = per
        for (variant, env, device, precision), value in self.cells.items():
            slot = cells[variant][f"{device}-{precision}"]
            slot["status"][env_index[env]] = value.status
            if len(value.counts) > 1 or value.counts[0][1] > 1:
                slot["counts"][env] = dict(value.counts)
        for per in cells.values():
            for slot in per.values():
                slot["counts"] = dict(
                    sorted(slot["counts"].items(), key=lambda kv: env_index[kv[0]])
                )
        return {
            "id": self.id,
            "title": self.title,
            "signature": {"type": self.signature_type, "message": self.signature_message},
            "runs": self.n_runs,
            "counted": self.n_counted,
            "newest": self.newest,
            "environments": [e.to_dict() for e in self.envs],
            "slices": [slice_id(s) for s in self.slices],
            "variants": [v.to_dict() for v in self.variants],
            "cells": cells,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "machines": [m.to_dict() for m in self.machines],
            "by_machine": [
                {
                    "variant": k[0],
                    "env": k[1],
                    "slice": f"{k[2]}-{k[3]}",
                    "disagree": k in self.disagree,
                    "machines": {m: v.to_dict() for m, v in values},
                }
                for k, values in sorted(self.by_machine.items())
            ],
        }


@dataclass(frozen=True)
class Aggregates:
    entries: tuple[EntryAggregate, ...]
    n_records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "records": self.n_records,
            "entries": [e.to_dict() for e in self.entries],
        }
