"""Records -> aggregates: cell values, rates with Wilson intervals, measured version ranges,
and claimed-vs-measured verdicts. Pure functions; no files, no clocks.

Counting rules (DESIGN.md, "Vocabulary"):
  * A run is *applicable* unless its outcome is in ``NOT_COUNTED`` (unsupported, skipped,
    env_failed): those are never a success nor a failure; they are listed with reasons.
  * baseline   reproduction rate = reproduced / applicable runs, in every cell.
  * workaround success rate      = ok / applicable runs, only in *reproducing cells*.
  * dead_end   failure rate      = not-ok / applicable runs, only in reproducing cells.
  * control    ok rate           = ok / applicable runs, in every cell.
  A *reproducing cell* is one (env, device, precision) where at least one run of at least
  one baseline of the entry was ``reproduced``. A workaround or dead end that changes the
  precision itself (none of its declared precisions is one its baselines run in, e.g.
  "switch to bf16-mixed" against an fp16 baseline) is counted in every cell of an
  (env, device) where a baseline reproduced in some precision: that is the comparison
  the document makes.
  * A cell whose applicable trials disagree is ``flaky`` (counts kept).

Verdict rules (the only place they are decided: ``judge_rate``, ``_version_verdict``,
``_message_verdict``):
  * A claimed rate is ``confirmed`` when it lies inside the Wilson 95% interval of the
    measured rate (bounds inclusive), ``contradicted`` when outside, ``not measurable``
    when the measured n is 0 (the reason says why n is 0).
  * ``fix_rate`` is compared with the success rate of the *best* workaround (highest
    measured rate among workarounds with n > 0; ties: larger n, then name). The pooled
    share of all workaround runs that were ok is reported beside it.
  * A version-table row with an "error present" status (active, affected, present) is
    confirmed when every measured environment satisfying its spec (with applicable
    baseline runs) reproduces in some device/precision, contradicted when one does not;
    a "fixed" status (fixed, resolved, removed, not_affected) the other way round. Its
    ``introduced``/``deprecated`` bounds contradict it when the error reproduces below
    ``introduced`` or at/above ``deprecated``. No measured environment satisfies the
    spec, or only unapplicable runs there -> not measurable.
  * The documented message is confirmed when some baseline run reproduced its
    signature, contradicted when baseline runs were applicable but none reproduced it
    (the messages seen instead are named, most frequent first), not measurable else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import itertools
import math
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from harness.domain import PRESENT_STATUSES, parse_claim_spec, pattern_text
from harness.outcomes import NOT_COUNTED, Outcome, signature_named
from harness.records import Record

if TYPE_CHECKING:
    from harness.entries import Entry

__all__ = [
    "CONFIRMED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "MARGIN",
    "VERDICTS",
    "NOT_MEASURABLE",
    "FLAKY",
    "OUTCOME_ORDER",
    "KIND_ORDER",
    "Aggregates",
    "CellValue",
    "EntryAggregate",
    "EnvInfo",
    "Machine",
    "MessageSeen",
    "NotCounted",
    "Rate",
    "ReproRange",
    "VariantAggregate",
    "Verdict",
    "aggregate",
    "aggregate_entries",
    "aggregate_entry",
    "entry_ids",
    "cell_value",
    "gc_paused",
    "env_info",
    "judge_most",
    "judge_rate",
    "records_by_entry",
    "wilson",
]

CONFIRMED = "confirmed"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_MEASURABLE = "not measurable"
VERDICTS = (CONFIRMED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURABLE)
MARGIN = 0.10  # a stated rate is read as "about c": c ± MARGIN (docs/verdicts.md)
FLAKY = "flaky"

OUTCOME_ORDER: tuple[Outcome, ...] = tuple(Outcome)
_OUTCOME_RANK = {o: i for i, o in enumerate(OUTCOME_ORDER)}
KIND_ORDER = ("baseline", "workaround", "dead_end", "control")
DEVICE_ORDER = ("cpu", "cuda")
PRECISION_ORDER = ("fp32", "fp16", "bf16")
METRIC = {
    "baseline": "reproduction rate",
    "workaround": "success rate",
    "dead_end": "failure rate",
    "control": "ok rate",
}

Z95 = 1.959963984540054  # two-sided 95% normal quantile


# -- rates ---------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of k successes in n trials; None when n == 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must lie in [0, n={n}]")
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # clamp rounding noise so that 0/n and n/n include 0 and 1 exactly
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Rate:
    k: int
    n: int
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        interval = wilson(k, n)
        if interval is None:
            return cls(k, n)
        return cls(k, n, interval[0], interval[1])

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def contains(self, rate: float) -> bool:
        if self.low is None or self.high is None:
            return False
        return self.low - 1e-12 <= rate <= self.high + 1e-12

    def text(self) -> str:
        """'7/8 = 87.5% (CI 52.9–97.8%)' (Wilson 95%) or '0/0 (no applicable runs)'."""
        if not self.n:
            return "0/0 (no applicable runs)"
        return f"{self.k}/{self.n} = {pct(self.value)} (CI {pct(self.low)[:-1]}–{pct(self.high)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "n": self.n,
            "rate": _round(self.value),
            "low": _round(self.low),
            "high": _round(self.high),
        }


def pct(x: float | None) -> str:
    if x is None:
        return "–"
    s = f"{100 * x:.1f}"
    return (s[:-2] if s.endswith(".0") else s) + "%"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def judge_rate(
    claimed: float | None, measured: Rate, why_empty: str, implicit: str = "works"
) -> tuple[str, str]:
    """The one rule for rate claims: (verdict, reason). A stated rate c is contradicted when
    c lies outside the measured 95% interval, confirmed when the whole interval lies within
    c ± MARGIN (the claim read as "about c"), inconclusive otherwise. With no stated rate
    the claim is the implicit one, "it works" (``implicit``; see ``judge_most``)."""
    if measured.n == 0:
        return NOT_MEASURABLE, why_empty
    if claimed is None:
        return judge_most(measured, implicit)
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the 95% interval {pct(low)[:-1]}–{pct(high)}"
    if not measured.contains(claimed):
        side = "above" if claimed > high else "below"
        return CONTRADICTED, f"claimed {pct(claimed)} lies {side} {interval}"
    if claimed - MARGIN - 1e-12 <= low and high <= claimed + MARGIN + 1e-12:
        return CONFIRMED, f"{interval} lies within claimed {pct(claimed)} ± {pct(MARGIN)}"
    return INCONCLUSIVE, (
        f"claimed {pct(claimed)} lies in {interval}, which also holds rates more than "
        f"{pct(MARGIN)} away from it"
    )


def judge_most(measured: Rate, what: str) -> tuple[str, str]:
    """An implicit claim, "this works" or "this fails", read as "in most applicable runs":
    confirmed when the whole 95% interval lies above 50%, contradicted when it lies below,
    inconclusive otherwise."""
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the 95% interval {pct(low)[:-1]}–{pct(high)}"
    claim = f"no rate stated: the claim is that it {what} in most runs"
    if low > 0.5:
        return CONFIRMED, f"{claim}; {interval} lies above 50%"
    if high < 0.5:
        return CONTRADICTED, f"{claim}; {interval} lies below 50%"
    return INCONCLUSIVE, f"{claim}; {interval} spans 50%"


# -- environments --------------------------------------------------------------------------

_ENV_PART = re.compile(r"(?:^|-)(py|torch|lightning)([0-9][^-]*)")


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
    named = {m.group(1): m.group(2) for m in _ENV_PART.finditer(env)}
    versions = versions or {}
    return EnvInfo(
        id=env,
        python=str(versions.get("python") or named.get("py", "")),
        torch=str(versions.get("torch") or named.get("torch", "")),
        lightning=str(versions.get("lightning") or named.get("lightning", "")),
    )


# -- aggregate types -----------------------------------------------------------------------

CellKey = tuple[str, str, str, str]  # variant, env, device, precision
Slice = tuple[str, str]  # device, precision


def slice_id(s: Slice) -> str:
    return f"{s[0]}-{s[1]}"


@dataclass(frozen=True)
class CellValue:
    status: str  # an Outcome value, or "flaky"
    counts: tuple[tuple[str, int], ...]  # (outcome value, trials), in OUTCOME_ORDER

    @property
    def trials(self) -> int:
        return sum(c for _, c in self.counts)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "counts": dict(self.counts)}


_SINGLE = {o: CellValue(o.value, ((o.value, 1),)) for o in Outcome}


def cell_value(outcomes: Iterable[Outcome]) -> CellValue:
    if isinstance(outcomes, list) and len(outcomes) == 1:
        return _SINGLE[outcomes[0]]  # the common case: one trial, a shared value
    counts = Counter(outcomes)
    if not counts:
        raise ValueError("a cell needs at least one trial")
    ordered = tuple((o.value, counts[o]) for o in OUTCOME_ORDER if counts[o])
    counted = [o for o in OUTCOME_ORDER if counts[o] and o not in NOT_COUNTED]
    if len(counted) > 1:
        status = FLAKY
    elif counted:
        status = counted[0].value
    else:  # only unapplicable trials: show the most frequent (first in order on ties)
        status = max(OUTCOME_ORDER, key=lambda o: (counts[o], -_OUTCOME_RANK[o])).value
    return CellValue(status, ordered)


@dataclass(frozen=True)
class MessageSeen:
    type: str
    message: str
    count: int
    outcomes: tuple[str, ...]
    envs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "count": self.count,
            "outcomes": list(self.outcomes),
            "envs": list(self.envs),
        }


@dataclass(frozen=True)
class Failure:
    """Counted runs of a variant that ended one way: an exception (its type and message)
    or, without one, the outcome and its reason (wrong_result, crashed, timeout)."""

    outcome: str
    text: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "text": self.text, "count": self.count}


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
    # the runs counted in ``overall`` that were not ok, by how they ended, most first
    failures: tuple[Failure, ...] = ()

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
            "failures": [f.to_dict() for f in self.failures],
        }


@dataclass(frozen=True)
class Verdict:
    claim: str  # what the document says, e.g. "fix rate", "version table: torch>=1.10 (active)"
    subject: str  # the variant or spec it concerns ("" for the entry)
    claimed: str
    measured: str
    verdict: str  # one of VERDICTS
    why: str
    seen_instead: str = ""  # the most frequent message seen instead, where relevant
    n: int = 0  # applicable runs behind the verdict

    @property
    def label(self) -> str:
        """'inconclusive (n=2)'; the other verdicts as they are."""
        return f"{self.verdict} (n={self.n})" if self.verdict == INCONCLUSIVE else self.verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "subject": self.subject,
            "claimed": self.claimed,
            "measured": self.measured,
            "verdict": self.verdict,
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
    runs: Mapping[CellKey, tuple[Record, ...]] = field(repr=False, compare=False)
    verdicts: tuple[Verdict, ...] = ()
    machines: tuple[Machine, ...] = ()
    # cells measured on several machines: (machine label, its value) per machine; and the
    # cells among them where the machines disagree
    by_machine: Mapping[CellKey, tuple[tuple[str, CellValue], ...]] = field(default_factory=dict)
    disagree: frozenset[CellKey] = frozenset()
    n_runs: int = 0
    n_counted: int = 0
    newest: str = ""  # started_at of the newest record ("" if none carry one)

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


# -- aggregation ---------------------------------------------------------------------------


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector. Aggregating and rendering a million records
    allocates millions of small acyclic objects; each automatic collection would walk all
    of them again (half the time at that size). Reentrant; the previous state comes back."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def aggregate(records: Iterable[Record], entries: Sequence[Entry] = ()) -> Aggregates:
    """Every entry that has a definition or a record, sorted by id."""
    with gc_paused():
        by_entry = records_by_entry(records)
        out = tuple(aggregate_entries(entry_ids(by_entry, entries), by_entry, entries))
    return Aggregates(out, sum(map(len, by_entry.values())))


def records_by_entry(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Entry id -> its records, in the order given."""
    by_entry: dict[str, list[Record]] = defaultdict(list)
    # records usually come entry by entry: extend by runs rather than one at a time
    for eid, run in itertools.groupby(records, key=_get_entry):
        by_entry[eid].extend(run)
    return dict(by_entry)


def entry_ids(by_entry: Mapping[str, Sequence[Record]], entries: Sequence[Entry] = ()) -> list[str]:
    """The ids of every entry that has a definition or a record, sorted."""
    return sorted(set(by_entry) | {e.id for e in entries})


def aggregate_entries(
    ids: Iterable[str], by_entry: Mapping[str, Sequence[Record]], entries: Sequence[Entry] = ()
) -> Iterator[EntryAggregate]:
    """The aggregates of the entries ``ids``, in that order (a part of ``aggregate``'s)."""
    known = {e.id: e for e in entries}
    env_cache: dict[tuple[str, str, str, str], EnvInfo] = {}
    for eid in ids:
        yield aggregate_entry(
            known.get(eid), by_entry.get(eid, ()), entry_id=eid, _env_cache=env_cache
        )


def _slice_key(s: Slice) -> tuple[Any, ...]:
    d, p = s
    return (
        DEVICE_ORDER.index(d) if d in DEVICE_ORDER else len(DEVICE_ORDER),
        d,
        PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(PRECISION_ORDER),
        p,
    )


_get_entry = operator.attrgetter("entry")
_get_env = operator.attrgetter("env")
_get_versions = operator.attrgetter("versions")
_get_provenance = operator.attrgetter("provenance")
_get_started = operator.attrgetter("started_at")
_REPRODUCED_VALUE = Outcome.REPRODUCED.value
assert OUTCOME_ORDER[0] is Outcome.REPRODUCED  # a cell with a reproduced trial lists it first
_VALUE = {o: o.value for o in Outcome}  # Enum.value is a slow descriptor; a dict is not
_ONE_VALUE = {o: (o.value,) for o in Outcome}
_VALUE_RANK = {o.value: i for i, o in enumerate(OUTCOME_ORDER)}
_NOT_COUNTED_VALUES = frozenset(o.value for o in NOT_COUNTED)
# per kind: the outcomes that count as a hit for its metric (among applicable runs)
_HITS = {
    "baseline": frozenset({Outcome.REPRODUCED.value}),
    # a dead end fails as documented: the documented error, or its own expected one
    "dead_end": frozenset({Outcome.REPRODUCED.value, Outcome.RELATED.value}),
}
_RELATED_VALUE = Outcome.RELATED.value
_OK_VALUE = Outcome.OK.value
_OK = Outcome.OK
_HITS_DEFAULT = frozenset({Outcome.OK.value})  # workaround, control, and any unknown kind

# one cell as the per-variant pass sees it: key, its trials (in record order), its value
_Cell = tuple[CellKey, tuple[Record, ...], CellValue]


def aggregate_entry(
    entry: Entry | None,
    records: Iterable[Record],
    *,
    entry_id: str | None = None,
    _env_cache: dict[tuple[str, str, str, str], EnvInfo] | None = None,
) -> EntryAggregate:
    if entry is None and entry_id is None:
        raise ValueError("aggregate_entry needs an entry or an entry_id")
    eid = entry.id if entry is not None else str(entry_id)
    env_cache = {} if _env_cache is None else _env_cache
    records = records if isinstance(records, (list, tuple)) else list(records)
    if entry is not None:
        records = reread(records, entry)
    n_runs = len(records)

    # the one pass over the records: group them into cells (a tuple of trials each)
    trials: dict[CellKey, tuple[Record, ...]] = {}
    multi: list[CellKey] = []
    for r in records:
        key = (r.variant, r.env, r.device, r.precision)
        rs = trials.get(key)
        if rs is None:
            trials[key] = (r,)
        else:
            if len(rs) == 1:
                multi.append(key)
            trials[key] = (*rs, r)

    # what records share (versions and provenance dicts, dates), over C-level columns
    env_versions = _env_versions(records)
    machines, newest = _machines(records)

    envs: list[EnvInfo] = []
    for env, (py, torch, lightning) in env_versions.items():
        ck = (env, py, torch, lightning)
        info = env_cache.get(ck)
        if info is None:
            info = env_info(env, {"python": py, "torch": torch, "lightning": lightning})
            env_cache[ck] = info
        envs.append(info)
    envs.sort(key=lambda e: e.sort_key)
    env_rank = {e.id: i for i, e in enumerate(envs)}

    # cells: values, and per variant (first record's kind, in record order)
    kinds: dict[str, str] = {}
    cells: dict[CellKey, CellValue] = {}
    by_variant: dict[str, list[_Cell]] = {}
    single = _SINGLE
    for key, rs in trials.items():
        cv = single[rs[0].outcome] if len(rs) == 1 else cell_value([r.outcome for r in rs])
        cells[key] = cv
        cell_list = by_variant.get(key[0])
        if cell_list is None:
            kinds[key[0]] = rs[0].kind
            cell_list = by_variant[key[0]] = []
        cell_list.append((key, rs, cv))
    slice_list = tuple(sorted({(k[2], k[3]) for k in trials}, key=_slice_key))
    for key in multi:  # runs as shown: trials in order (stats above do not depend on it)
        trials[key] = tuple(sorted(trials[key], key=_run_order))

    # variants: the entry's, in its order; then any only the records name
    declared = list(entry.variants) if entry is not None else []
    declared_names = {v.name for v in declared}
    extra = sorted(
        (n for n in kinds if n not in declared_names),
        key=lambda n: (KIND_ORDER.index(kinds[n]) if kinds[n] in KIND_ORDER else 9, n),
    )

    baseline_names = {v.name for v in declared if v.kind == "baseline"} | {
        n for n in extra if kinds[n] == "baseline"
    }
    reproducing: set[tuple[str, str, str]] = set()
    for name in baseline_names:
        for key, _, cv in by_variant.get(name, ()):
            if cv.counts[0][0] == _REPRODUCED_VALUE:
                reproducing.add(key[1:])
    reproducing_env_device = {k[:2] for k in reproducing}
    baseline_precisions = {p for v in declared if v.kind == "baseline" for p in v.precisions}
    changes_precision = {
        v.name
        for v in declared
        if v.kind in ("workaround", "dead_end") and not set(v.precisions) & baseline_precisions
    }

    variants: list[VariantAggregate] = []
    n_counted = 0
    seen: set[str] = set()
    specs = [
        (v.name, v.kind, v.description, v.claim_ref, v.claimed_rate, v.reading) for v in declared
    ]
    specs += [(n, kinds[n], "", None, None, None) for n in extra]
    for name, kind, description, claim_ref, claimed_rate, reading in specs:
        va, counted = _variant_aggregate(
            name,
            kind,
            description,
            claim_ref,
            claimed_rate,
            reading,
            by_variant.get(name, []),
            reproducing_env_device if name in changes_precision else reproducing,
            slice_list,
            env_rank,
            scope=2 if name in changes_precision else 3,
        )
        variants.append(va)
        if name not in seen:  # (a repeated declared name counts its runs once)
            seen.add(name)
            n_counted += counted

    labels = machine_labels((k[0], k[1]) for k in machines)
    machine_list = tuple(
        sorted(
            (
                Machine(labels[(k[0], k[1])], *k[1:], runs=m[0], first=m[1], last=m[2])
                for k, m in machines.items()
            ),
            key=lambda m: (m.name, m.machine_id, *(getattr(m, f) for f in Machine.FIELDS)),
        )
    )
    by_machine, disagree = _per_machine(trials, labels)
    sig = entry.signature if entry is not None else None
    agg = EntryAggregate(
        id=eid,
        title=entry.title if entry is not None else eid,
        signature_type=sig.type if sig else "",
        signature_message=sig.message if sig else "",
        document=str(entry.document) if entry is not None else None,
        envs=tuple(envs),
        slices=slice_list,
        variants=tuple(variants),
        cells=cells,
        runs=trials,
        machines=machine_list,
        by_machine=by_machine,
        disagree=disagree,
        n_runs=n_runs,
        n_counted=n_counted,
        newest=newest,
    )
    verdicts = _verdicts(entry, agg)
    return EntryAggregate(**{**agg.__dict__, "verdicts": verdicts})


def reread(records: Sequence[Record], entry: Entry) -> Sequence[Record]:
    """Records of variants that declare their own signature, re-read against the entry as
    it is now: a ``reproduced`` run whose exception is not the documented one, or an
    ``other_error`` run whose exception is the variant's own, is ``related`` (schema 2
    recorded a variant's own signature as reproduced; a signature added to entry.yaml after
    the run was not known to it). Everything else as given."""
    own = {v.name: v.signature for v in entry.variants if v.signature is not None}
    if not own:
        return records
    sig = entry.signature
    out = list(records)
    for i, r in enumerate(out):
        exc = r.exception
        if exc is None or r.variant not in own or r.outcome not in _REREAD:
            continue
        if r.outcome is Outcome.REPRODUCED:
            related = not signature_named(exc.type, exc.message, sig.type, sig.message)
        else:
            mine = own[r.variant]
            related = signature_named(exc.type, exc.message, mine.type, mine.message)
        if related:
            out[i] = dataclasses.replace(r, outcome=Outcome.RELATED)
    return out


_REREAD = frozenset({Outcome.REPRODUCED, Outcome.OTHER_ERROR})


def _env_versions(records: Sequence[Record]) -> dict[str, tuple[str, str, str]]:
    """Per env, the (python, torch, lightning) its records report. Several records
    (machines) may report one env: per field, keep the smallest non-empty value, so that the
    choice does not depend on the records' order."""
    versions = list(map(_get_versions, records))
    # records share versions dicts: look at each distinct (env, dict) once
    distinct = dict(
        zip(zip(map(_get_env, records), map(id, versions), strict=True), versions, strict=True)
    )
    out: dict[str, tuple[str, str, str]] = {}
    for (env, _), v in distinct.items():
        got = (
            (v.get("python", ""), v.get("torch", ""), v.get("lightning", "")) if v else ("", "", "")
        )
        old = out.get(env)
        if old is not None:
            got = tuple(min(a, b) if a and b else a or b for a, b in zip(old, got, strict=True))  # type: ignore[assignment]
        out[env] = got
    return out


def _machines(records: Sequence[Record]) -> tuple[dict[tuple[str, ...], list[Any]], str]:
    """(machine name, machine id, provenance fields) -> [runs, earliest non-empty
    started_at or "", newest started_at], and the newest started_at of all ("" if none)."""
    fields = Machine.FIELDS
    machines: dict[tuple[str, ...], list[Any]] = {}
    newest = ""
    for r in records:
        p = r.provenance
        mk = (r.machine, r.machine_id, *(str(p.get(f, "")) for f in fields))
        t = r.started_at
        m = machines.get(mk)
        if m is None:
            machines[mk] = [1, t, t]
        else:
            m[0] += 1
            if t and (not m[1] or t < m[1]):
                m[1] = t
            if t > m[2]:
                m[2] = t
        if t > newest:
            newest = t
    return machines, newest


def machine_labels(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(name, id) -> how reports name the machine: its name, with the start of its id where
    two machines of one entry share a name."""
    keys = set(keys)
    names = Counter(name for name, _ in keys)
    return {
        (name, mid): (name or "?") + (f" ({mid[:8] or 'id unknown'})" if names[name] > 1 else "")
        for name, mid in keys
    }


def _per_machine(
    trials: Mapping[CellKey, tuple[Record, ...]], labels: Mapping[tuple[str, str], str]
) -> tuple[dict[CellKey, tuple[tuple[str, CellValue], ...]], frozenset[CellKey]]:
    """The cells measured on more than one machine: each machine's value (machines by
    label), and the cells where the machines disagree: their applicable trials ended in
    different statuses (a machine that could not measure the cell does not disagree)."""
    by_machine: dict[CellKey, tuple[tuple[str, CellValue], ...]] = {}
    disagree: set[CellKey] = set()
    for key, rs in trials.items():
        if len(rs) < 2:
            continue
        first = rs[0].machine_key
        if all(r.machine_key == first for r in rs):
            continue
        grouped: dict[str, list[Outcome]] = defaultdict(list)
        for r in rs:
            grouped[labels[(r.machine, r.machine_id)]].append(r.outcome)
        values = tuple((m, cell_value(grouped[m])) for m in sorted(grouped))
        by_machine[key] = values
        counted = {v.status for _, v in values if v.status not in _NOT_COUNTED_VALUES}
        if len(counted) > 1:
            disagree.add(key)
    return by_machine, frozenset(disagree)


def _run_order(r: Record) -> tuple[Any, ...]:
    return (r.trial, r.started_at, r.outcome.value, r.provenance.get("host", ""), r.duration_s)


def _outcome_values(outcomes: set[Outcome]) -> tuple[str, ...]:
    if len(outcomes) == 1:
        return _ONE_VALUE[next(iter(outcomes))]
    return tuple(sorted({_VALUE[o] for o in outcomes}, key=_VALUE_RANK.__getitem__))


def _cell_stats(cv: CellValue, hits: frozenset[str]) -> tuple[int, int, int, int, bool, bool]:
    """(counted trials, hits among them, related trials, ok trials, any not-counted trial,
    any reproduced trial)"""
    n = k = related = ok = 0
    has_not_counted = False
    for o, c in cv.counts:
        if o in _NOT_COUNTED_VALUES:
            has_not_counted = True
            continue
        n += c
        if o in hits:
            k += c
        if o == _RELATED_VALUE:
            related += c
        elif o == _OK_VALUE:
            ok += c
    return n, k, related, ok, has_not_counted, cv.counts[0][0] == _REPRODUCED_VALUE


def _variant_aggregate(
    name: str,
    kind: str,
    description: str,
    claim_ref: str | None,
    claimed_rate: float | None,
    reading: str | None,
    cells: list[_Cell],
    reproducing: set[tuple[str, ...]],
    slices: tuple[Slice, ...],
    env_rank: Mapping[str, int],
    scope: int = 3,  # reproducing holds (env, device, precision)[:scope]: 2 = across precisions
) -> tuple[VariantAggregate, int]:
    """The variant's aggregate, and how many of its runs were applicable (any cell)."""
    hits = _HITS.get(kind, _HITS_DEFAULT)
    stats: dict[int, tuple[int, int, int, int, bool, bool]] = {}  # id(cell value) -> _cell_stats
    per_slice: dict[Slice, list[int]] = {s: [0, 0, 0, 0] for s in slices}  # k, n, related, ok
    by_exception: dict[int, list[Any]] = {}  # id(exception) -> [exception, count, outcomes, envs]
    not_counted: dict[tuple[str, str], list[Any]] = {}
    measured: dict[Slice, set[str]] = defaultdict(set)
    reproduced: dict[Slice, set[str]] = defaultdict(set)
    failures: dict[tuple[str, str], int] = {}
    runs = counted = 0
    anywhere = [0]  # hits over every applicable run (n is `counted`)
    restricted = kind in ("workaround", "dead_end")
    for key, rs, cv in cells:
        env = key[1]
        runs += len(rs)
        for r in rs:
            exc = r.exception
            if exc is not None:
                m = by_exception.get(id(exc))
                if m is None:
                    by_exception[id(exc)] = [exc, 1, {r.outcome}, {env}]
                else:
                    m[1] += 1
                    m[2].add(r.outcome)
                    m[3].add(env)
        st = stats.get(id(cv))
        if st is None:
            st = stats[id(cv)] = _cell_stats(cv, hits)
        n, k, related, ok, has_not_counted, has_reproduced = st
        if has_not_counted:
            for r in rs:
                if r.outcome in NOT_COUNTED:
                    nk = (r.outcome, r.reason)
                    m = not_counted.get(nk)
                    if m is None:
                        not_counted[nk] = [1, {env}]
                    else:
                        m[0] += 1
                        m[1].add(env)
        if not n:
            continue
        counted += n
        anywhere[0] += k
        s = (key[2], key[3])
        measured[s].add(env)
        if has_reproduced:
            reproduced[s].add(env)
        if not restricted or key[1 : 1 + scope] in reproducing:
            if n != st[3]:  # some counted trial was not ok
                for r in rs:
                    o = r.outcome
                    if o is _OK or o in NOT_COUNTED:
                        continue
                    exc = r.exception
                    text = (
                        f"{exc.type}: {exc.message}"
                        if exc is not None
                        else f"{o.value}: {r.reason}"
                    )
                    fk = (o.value, text)
                    failures[fk] = failures.get(fk, 0) + 1
            ps = per_slice[s]
            ps[0] += k
            ps[1] += n
            ps[2] += related
            ps[3] += ok

    def by_env(envs: set[str]) -> tuple[str, ...]:
        if len(envs) == 1:
            return tuple(envs)
        return tuple(sorted(envs, key=env_rank.__getitem__))

    ranges: list[ReproRange] = []
    if kind == "baseline":
        all_measured = set().union(*measured.values()) if measured else set()
        all_reproduced = set().union(*reproduced.values()) if reproduced else set()
        ranges.append(_range("*", by_env(all_measured), by_env(all_reproduced)))
        for s in slices:
            if s in measured:
                ranges.append(
                    _range(slice_id(s), by_env(measured[s]), by_env(reproduced.get(s, ())))
                )

    messages: dict[tuple[str, str], list[Any]] = {}
    for exc, count, outcomes, envs in by_exception.values():
        mk = (exc.type, exc.message)
        m = messages.get(mk)
        if m is None:
            messages[mk] = [count, outcomes, envs]
        else:
            m[0] += count
            m[1] |= outcomes
            m[2] |= envs
    # most frequent first, then by type and message: the first three fields are unique
    order = sorted((-m[0], t, msg, m[1], m[2]) for (t, msg), m in messages.items())
    msgs = [
        MessageSeen(t, msg, -neg, _outcome_values(outcomes), by_env(envs))
        for neg, t, msg, outcomes, envs in order
    ]
    ncs = sorted(
        (
            NotCounted(_VALUE[o], reason, m[0], by_env(m[1]))
            for (o, reason), m in not_counted.items()
        ),
        key=lambda m: (-m.count, m.outcome, m.reason),
    )
    k_all = sum(ps[0] for ps in per_slice.values())
    n_all = sum(ps[1] for ps in per_slice.values())
    related_all = sum(ps[2] for ps in per_slice.values())
    ok_all = sum(ps[3] for ps in per_slice.values())
    va = VariantAggregate(
        name=name,
        kind=kind,
        description=description,
        claim_ref=claim_ref,
        claimed_rate=claimed_rate,
        reading=reading,
        metric=METRIC.get(kind, "ok rate"),
        overall=Rate.of(k_all, n_all),
        related=Rate.of(related_all, n_all),
        ok=Rate.of(ok_all, n_all),
        failures=tuple(
            Failure(o, text, c)
            for (o, text), c in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        by_slice=tuple((slice_id(s), Rate.of(*per_slice[s][:2])) for s in slices),
        ranges=tuple(ranges),
        messages=tuple(msgs),
        not_counted=tuple(ncs),
        runs=runs,
        anywhere=Rate.of(anywhere[0], counted),
    )
    return va, counted


def _range(sid: str, measured: tuple[str, ...], reproduced: tuple[str, ...]) -> ReproRange:
    newest = measured[-1] if measured else None
    return ReproRange(
        slice=sid,
        first=reproduced[0] if reproduced else None,
        last=reproduced[-1] if reproduced else None,
        newest=newest,
        in_newest=None if newest is None else newest in set(reproduced),
        measured=measured,
        reproduced=reproduced,
    )


# -- verdicts ------------------------------------------------------------------------------


def _message_text(m: MessageSeen | None) -> str:
    return "" if m is None else f"{m.type}: {m.message}"


def _why_no_applicable(agg: EntryAggregate, v: VariantAggregate) -> str:
    baselines = [b for b in agg.variants if b.kind == "baseline"]
    if not v.runs:
        return "the variant has no runs"
    if v.kind in ("workaround", "dead_end"):
        if not any(b.overall.k for b in baselines):
            if not any(b.overall.n for b in baselines):
                return "no baseline run was applicable (all unsupported, skipped or env_failed), so no cell reproduces"
            why = "the baseline never reproduced, so there is no cell in which to test it"
            if v.anywhere.n:
                seen = "; ".join(f"{_message_text(m)} (×{m.count})" for m in v.messages[:2])
                why += (
                    f"; where it ran, it was "
                    f"{'ok' if v.kind == 'workaround' else 'failing as documented'} in "
                    f"{v.anywhere.k}/{v.anywhere.n} applicable runs"
                    + (f" ({seen})" if seen else "")
                )
            return why
        return "none of its runs in reproducing cells was applicable (unsupported, skipped or env_failed)"
    return "all its runs were unsupported, skipped or env_failed"


_EXPECTED = {
    "workaround": frozenset({Outcome.OK.value}),
    "control": frozenset({Outcome.OK.value}),
    "dead_end": frozenset({Outcome.REPRODUCED.value, Outcome.RELATED.value}),
    "baseline": frozenset({Outcome.REPRODUCED.value}),
}


def _verdicts(entry: Entry | None, agg: EntryAggregate) -> tuple[Verdict, ...]:
    out: list[Verdict] = []
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    workarounds = [v for v in agg.variants if v.kind == "workaround"]
    claims = entry.claims if entry is not None else None

    # the documented message
    out.append(_message_verdict(agg, baselines))

    # fix rate
    if claims is not None and claims.fix_rate is not None:
        out.append(_fix_rate_verdict(claims.fix_rate, agg, workarounds))

    # version table
    if claims is not None:
        for row in claims.version_table:
            out.append(_version_verdict(row, agg, baselines))

    # per-variant rates: a stated rate, or the implicit claim of an unrated recommendation
    for v in agg.variants:
        if v.kind not in ("workaround", "dead_end") or (
            v.claim_ref is None and v.claimed_rate is None
        ):
            continue
        out.append(_variant_verdict(agg, v))
    return tuple(out)


def _fix_rate_verdict(
    fix_rate: float, agg: EntryAggregate, workarounds: list[VariantAggregate]
) -> Verdict:
    measured_w = [w for w in workarounds if w.overall.n]
    pooled = Rate.of(sum(w.overall.k for w in workarounds), sum(w.overall.n for w in workarounds))
    if not workarounds:
        return Verdict(
            "fix rate",
            "",
            pct(fix_rate),
            "–",
            NOT_MEASURABLE,
            "the entry has no workaround variant",
        )
    if not measured_w:
        why = _why_no_applicable(agg, workarounds[0])
        return Verdict(
            "fix rate", "", pct(fix_rate), "0/0 (no applicable runs)", NOT_MEASURABLE, why
        )
    best = max(measured_w, key=lambda w: (w.overall.value, w.overall.n, _neg(w.name)))
    verdict, why = judge_rate(fix_rate, best.overall, "")
    why = f"basis: best workaround {best.name!r}; {why}; pooled workaround runs ok: {pooled.text()}"
    seen = ""
    if verdict != CONFIRMED:
        seen = _failures_text(best, _EXPECTED["workaround"])
    return Verdict(
        "fix rate", "", pct(fix_rate), best.overall.text(), verdict, why, seen, best.overall.n
    )


def _variant_verdict(agg: EntryAggregate, v: VariantAggregate) -> Verdict:
    what = v.claim_ref or v.kind.replace("_", " ")
    label = f"{what}: {v.metric}" + (f" ({v.reading} reading)" if v.reading else "")
    implicit = "works" if v.kind == "workaround" else "fails as documented"
    verdict, why = judge_rate(v.claimed_rate, v.overall, _why_no_applicable(agg, v), implicit)
    if v.kind == "dead_end" and v.overall.n:
        # a failure for another reason is named, never counted as this claim's failure
        why += (
            f"; failed as documented in {v.overall.k}/{v.overall.n}"
            + (f" (its own expected error in {v.related.k})" if v.related.k else "")
            + f", for another reason in {v.failed_otherwise}/{v.overall.n}"
            + f", ok in {v.ok.k}/{v.overall.n}"
        )
    seen = ""
    if v.overall.n and (verdict != CONFIRMED or (v.kind == "dead_end" and v.failed_otherwise)):
        seen = _failures_text(v, _EXPECTED.get(v.kind, _EXPECTED["workaround"]))
    claimed = pct(v.claimed_rate) if v.claimed_rate is not None else f"it {implicit} (no rate)"
    return Verdict(label, v.name, claimed, v.overall.text(), verdict, why, seen, v.overall.n)


def _failures_text(v: VariantAggregate, expected: frozenset[str]) -> str:
    """What the variant's runs did instead of what its claim expects, most frequent first:
    exceptions (type: message) and, for runs without one, the outcome and its reason."""
    seen = [
        (f.count, f.text) for f in v.failures if f.outcome not in expected and f.outcome != "ok"
    ]
    seen.sort(key=lambda cf: -cf[0])
    return "; ".join(f"{text} (×{count})" for count, text in seen[:3])


def _neg(s: str) -> tuple[int, ...]:
    # for max(): ties on rate and n go to the alphabetically first name
    return tuple(-ord(c) for c in s)


def _messages_instead(baselines: list[VariantAggregate], envs: set[str] | None = None) -> str:
    """Baseline exceptions other than the documented one (a variant's related error
    included), most frequent first (top 3)."""
    instead: Counter[tuple[str, str]] = Counter()
    for b in baselines:
        for m in b.messages:
            if m.outcomes == (Outcome.REPRODUCED.value,):
                continue
            if envs is not None and not envs.intersection(m.envs):
                continue
            instead[(m.type, m.message)] += m.count
    top = sorted(instead.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(f"{t}: {msg} (×{c})" for (t, msg), c in top[:3])


def _message_verdict(agg: EntryAggregate, baselines: list[VariantAggregate]) -> Verdict:
    """The documented message occurs: one reproduction shows it; none, in enough applicable
    runs that an error occurring in half of them would have been seen (the 95% interval of
    0/n lies below 50%), contradicts it; fewer runs are inconclusive."""
    claimed = f"{agg.signature_type}: {agg.signature_text}" if agg.signature_type else "–"
    k = sum(b.overall.k for b in baselines)
    n = sum(b.overall.n for b in baselines)
    seen = _messages_instead(baselines)
    if not baselines:
        return Verdict(
            "documented message",
            "",
            claimed,
            "–",
            NOT_MEASURABLE,
            "the entry has no baseline variant",
        )
    measured = f"documented error in {k}/{n} applicable baseline runs"
    related = [b for b in baselines if b.related.k]
    if related:
        measured += (
            f", the variant's related error in {sum(b.related.k for b in related)}/{n} ("
            + ", ".join(b.name for b in related)
            + ")"
        )
    if k:
        why = "the documented signature was raised"
        if related:
            why += "; a variant's own (related) error is counted apart, never as the documented one"
        return Verdict("documented message", "", claimed, measured, CONFIRMED, why, "", n)
    if not n:
        why = "no baseline run was applicable (all unsupported, skipped or env_failed)"
        if not any(b.runs for b in baselines):
            why = "the baseline has no runs"
        return Verdict("documented message", "", claimed, measured, NOT_MEASURABLE, why)
    why = "never seen" + (
        "; seen instead: " + seen if seen else "; the baseline raised no exception"
    )
    retyped = _documented_message_other_type(agg, baselines)
    if retyped:
        why = f"the documented message was raised as {retyped}, not {agg.signature_type}; " + why
    high = Rate.of(0, n).high or 0.0
    if high < 0.5:
        return Verdict("documented message", "", claimed, measured, CONTRADICTED, why, seen, n)
    why += f"; in {n} runs an error occurring in up to {pct(high)} of runs could stay unseen"
    return Verdict("documented message", "", claimed, measured, INCONCLUSIVE, why, seen, n)


def _documented_message_other_type(agg: EntryAggregate, baselines: list[VariantAggregate]) -> str:
    """The type of an exception that carried the documented message under another type
    (a document naming ValueError where the framework raises its own exception), or ""."""
    if not agg.signature_message:
        return ""
    pattern = re.compile(agg.signature_message, re.DOTALL)
    for b in baselines:
        for m in b.messages:
            if Outcome.REPRODUCED.value not in m.outcomes and pattern.search(m.message):
                return m.type
    return ""


def _env_version(env: EnvInfo, field_name: str) -> Version | None:
    return _public(_version(getattr(env, field_name)))


def _baseline_by_env(
    agg: EntryAggregate, baselines: list[VariantAggregate]
) -> dict[str, list[int]]:
    """env id -> [documented reproductions, applicable baseline runs], any device/precision."""
    names = {b.name for b in baselines}
    out: dict[str, list[int]] = {}
    for (variant, env, _, _), value in agg.cells.items():
        if variant not in names:
            continue
        slot = out.setdefault(env, [0, 0])
        for o, c in value.counts:
            if o in _NOT_COUNTED_VALUES:
                continue
            slot[1] += c
            if o == _REPRODUCED_VALUE:
                slot[0] += c
    return out


def _version_verdict(row: Any, agg: EntryAggregate, baselines: list[VariantAggregate]) -> Verdict:
    """A version-table row, judged environment by environment: an environment where the
    documented error reproduced shows it present; one where it never did shows it absent
    only when the 95% interval of 0/n lies below 50%, else that environment is undecided."""
    label = f"version table: {row.spec} ({row.status})"
    claimed = row.status + "".join(
        f", {k} {v}"
        for k, v in (("introduced", row.introduced), ("deprecated", row.deprecated))
        if v
    )
    try:
        field_name, spec = parse_claim_spec(row.spec)
    except ValueError as exc:  # entries validate at load; a hand-built claim may not
        return Verdict(label, row.spec, claimed, "–", NOT_MEASURABLE, str(exc))
    counts = _baseline_by_env(agg, baselines)
    satisfying: list[EnvInfo] = []
    for e in agg.envs:
        v = _env_version(e, field_name)
        if v is not None and spec.contains(v, prereleases=True):
            satisfying.append(e)
    applicable = [e for e in satisfying if counts.get(e.id, (0, 0))[1]]
    rep = [e for e in applicable if counts[e.id][0]]
    absent = [
        e
        for e in applicable
        if not counts[e.id][0] and (Rate.of(0, counts[e.id][1]).high or 0.0) < 0.5
    ]
    undecided = [e for e in applicable if e not in rep and e not in absent]
    n = sum(counts[e.id][1] for e in applicable)
    measured = f"reproduces in {len(rep)}/{len(applicable)} measured envs satisfying the spec"
    if undecided:
        measured += f" ({len(undecided)} with too few runs to tell)"
    if not satisfying:
        why = f"no measured environment satisfies {row.spec}"
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE, why)
    if not applicable:
        why = (
            "every baseline run in the environments satisfying the spec was unsupported, "
            "skipped or env_failed"
        )
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE, why)
    # introduced / deprecated bounds: a reproduction outside them contradicts the row
    problems: list[str] = []
    for bound, below in (("introduced", True), ("deprecated", False)):
        raw = getattr(row, bound)
        bv = _public(_version(raw)) if raw else None
        if bv is None:
            continue
        for e in agg.envs:
            ev = _env_version(e, field_name)
            if ev is None or not counts.get(e.id, (0, 0))[0]:
                continue
            if (below and ev < bv) or (not below and ev >= bv):
                problems.append(
                    f"reproduces in {e.id}, {'before' if below else 'at/after'} {bound} {raw}"
                )
                break
    present = row.status.strip().lower() in PRESENT_STATUSES
    if present and absent:
        problems.insert(0, "does not reproduce in " + ", ".join(e.id for e in absent))
    elif not present and rep:
        problems.insert(0, "reproduces in " + ", ".join(e.id for e in rep))
    if problems:
        seen = _messages_instead(baselines, {e.id for e in absent}) if present else ""
        return Verdict(
            label, row.spec, claimed, measured, CONTRADICTED, "; ".join(problems), seen, n
        )
    if undecided:
        why = "too few applicable baseline runs to tell in " + ", ".join(
            f"{e.id} (0/{counts[e.id][1]})" for e in undecided
        )
        return Verdict(label, row.spec, claimed, measured, INCONCLUSIVE, why, "", n)
    return Verdict(
        label,
        row.spec,
        claimed,
        measured,
        CONFIRMED,
        "consistent in " + ", ".join(e.id for e in applicable),
        "",
        n,
    )
