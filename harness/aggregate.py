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
  one baseline of the entry was ``reproduced``.
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

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.outcomes import NOT_COUNTED, Outcome
from harness.records import Record

if TYPE_CHECKING:
    from harness.entries import Entry

__all__ = [
    "CONFIRMED",
    "CONTRADICTED",
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
    "aggregate_entry",
    "cell_value",
    "env_info",
    "judge_rate",
    "wilson",
]

CONFIRMED = "confirmed"
CONTRADICTED = "contradicted"
NOT_MEASURABLE = "not measurable"
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
PRESENT_STATUSES = frozenset({"active", "affected", "present"})
FIXED_STATUSES = frozenset({"fixed", "resolved", "removed", "not_affected", "not affected"})

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


def judge_rate(claimed: float | None, measured: Rate, why_empty: str) -> tuple[str, str]:
    """The one rule for rate claims: (verdict, reason)."""
    if claimed is None:
        return NOT_MEASURABLE, "the document states no figure to compare"
    if measured.n == 0:
        return NOT_MEASURABLE, why_empty
    if measured.contains(claimed):
        return CONFIRMED, f"claimed {pct(claimed)} lies in the 95% interval"
    side = "above" if claimed > (measured.high or 0.0) else "below"
    return CONTRADICTED, f"claimed {pct(claimed)} lies {side} the 95% interval"


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
        return {"id": self.id, "python": self.python, "torch": self.torch, "lightning": self.lightning}


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
class NotCounted:
    outcome: str
    reason: str
    count: int
    envs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "count": self.count, "envs": list(self.envs)}


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
        }


@dataclass(frozen=True)
class Verdict:
    claim: str  # what the document says, e.g. "fix rate", "version table: torch>=1.10 (active)"
    subject: str  # the variant or spec it concerns ("" for the entry)
    claimed: str
    measured: str
    verdict: str  # CONFIRMED | CONTRADICTED | NOT_MEASURABLE
    why: str
    seen_instead: str = ""  # the most frequent message seen instead, where relevant

    def to_dict(self) -> dict[str, str]:
        return {
            "claim": self.claim,
            "subject": self.subject,
            "claimed": self.claimed,
            "measured": self.measured,
            "verdict": self.verdict,
            "why": self.why,
            "seen_instead": self.seen_instead,
        }


@dataclass(frozen=True)
class Machine:
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
    n_runs: int = 0
    n_counted: int = 0
    newest: str = ""  # started_at of the newest record ("" if none carry one)

    def variant(self, name: str) -> VariantAggregate:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

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
                slot["counts"] = dict(sorted(slot["counts"].items(), key=lambda kv: env_index[kv[0]]))
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
        }


@dataclass(frozen=True)
class Aggregates:
    entries: tuple[EntryAggregate, ...]
    n_records: int

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "records": self.n_records, "entries": [e.to_dict() for e in self.entries]}


# -- aggregation ---------------------------------------------------------------------------


def aggregate(records: Iterable[Record], entries: Sequence[Entry] = ()) -> Aggregates:
    """Every entry that has a definition or a record, sorted by id."""
    by_entry: dict[str, list[Record]] = defaultdict(list)
    n = 0
    for r in records:
        by_entry[r.entry].append(r)
        n += 1
    known = {e.id: e for e in entries}
    env_cache: dict[tuple[str, str, str, str], EnvInfo] = {}
    out = tuple(
        aggregate_entry(known.get(eid), by_entry.get(eid, ()), entry_id=eid, _env_cache=env_cache)
        for eid in sorted(set(by_entry) | set(known))
    )
    return Aggregates(out, n)


def _slice_key(s: Slice) -> tuple[Any, ...]:
    d, p = s
    return (
        DEVICE_ORDER.index(d) if d in DEVICE_ORDER else len(DEVICE_ORDER),
        d,
        PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(PRECISION_ORDER),
        p,
    )


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

    trials: dict[CellKey, list[Record]] = defaultdict(list)
    kinds: dict[str, str] = {}
    env_versions: dict[str, tuple[str, str, str]] = {}
    machines: dict[tuple[str, ...], list[Any]] = {}
    machine_keys: dict[int, tuple[str, ...]] = {}
    records = records if isinstance(records, (list, tuple)) else list(records)
    n_runs = 0
    newest = ""
    for r in records:
        n_runs += 1
        trials[(r.variant, r.env, r.device, r.precision)].append(r)
        kinds.setdefault(r.variant, r.kind)
        v = r.versions
        old = env_versions.get(r.env)
        if old is None or (v and old != (v.get("python", ""), v.get("torch", ""), v.get("lightning", ""))):
            # several records (machines) may report one env: per field, keep the smallest
            # non-empty value, so that the choice does not depend on the records' order
            got = (v.get("python", ""), v.get("torch", ""), v.get("lightning", "")) if v else ("", "", "")
            if old is not None:
                got = tuple(min(a, b) if a and b else a or b for a, b in zip(old, got, strict=True))  # type: ignore[assignment]
            env_versions[r.env] = got
        p = r.provenance
        mkey = machine_keys.get(id(p))  # records share provenance dicts; all alive here
        if mkey is None:
            mkey = machine_keys[id(p)] = tuple(str(p.get(f, "")) for f in Machine.FIELDS)
        m = machines.get(mkey)
        if m is None:
            machines[mkey] = [1, r.started_at, r.started_at]
        else:
            m[0] += 1
            if r.started_at and (not m[1] or r.started_at < m[1]):
                m[1] = r.started_at
            if r.started_at > m[2]:
                m[2] = r.started_at
        if r.started_at > newest:
            newest = r.started_at

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

    # variants: the entry's, in its order; then any only the records name
    declared = list(entry.variants) if entry is not None else []
    declared_names = {v.name for v in declared}
    extra = sorted(
        (n for n in kinds if n not in declared_names),
        key=lambda n: (KIND_ORDER.index(kinds[n]) if kinds[n] in KIND_ORDER else 9, n),
    )
    slices: set[Slice] = set()
    cells: dict[CellKey, CellValue] = {}
    for key, rs in trials.items():
        slices.add((key[2], key[3]))
        cells[key] = cell_value([r.outcome for r in rs])
    slice_list = tuple(sorted(slices, key=_slice_key))

    baseline_names = [v.name for v in declared if v.kind == "baseline"] + [
        n for n in extra if kinds[n] == "baseline"
    ]
    reproducing: set[tuple[str, str, str]] = set()
    for (variant, env, device, precision), cv in cells.items():
        if variant in baseline_names and any(o == Outcome.REPRODUCED.value for o, _ in cv.counts):
            reproducing.add((env, device, precision))

    by_variant: dict[str, list[tuple[CellKey, list[Record]]]] = defaultdict(list)
    for key, rs in trials.items():
        by_variant[key[0]].append((key, rs))

    variants: list[VariantAggregate] = []
    specs = [(v.name, v.kind, v.description, v.claim_ref, v.claimed_rate, v.reading) for v in declared]
    specs += [(n, kinds[n], "", None, None, None) for n in extra]
    for name, kind, description, claim_ref, claimed_rate, reading in specs:
        variants.append(
            _variant_aggregate(
                name, kind, description, claim_ref, claimed_rate, reading,
                by_variant.get(name, []), reproducing, slice_list, env_rank, [e.id for e in envs],
            )
        )

    n_counted = sum(1 for rs in trials.values() for r in rs if r.outcome not in NOT_COUNTED)
    machine_list = tuple(
        sorted(
            (Machine(*k, runs=m[0], first=m[1] or "", last=m[2] or "") for k, m in machines.items()),
            key=lambda m: tuple(getattr(m, f) for f in Machine.FIELDS),
        )
    )
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
        runs={k: tuple(v) if len(v) == 1 else tuple(sorted(v, key=_run_order)) for k, v in trials.items()},
        machines=machine_list,
        n_runs=n_runs,
        n_counted=n_counted,
        newest=newest,
    )
    verdicts = _verdicts(entry, agg)
    return EntryAggregate(**{**agg.__dict__, "verdicts": verdicts})


def _run_order(r: Record) -> tuple[Any, ...]:
    return (r.trial, r.started_at, r.outcome.value, r.provenance.get("host", ""), r.duration_s)


def _variant_aggregate(
    name: str,
    kind: str,
    description: str,
    claim_ref: str | None,
    claimed_rate: float | None,
    reading: str | None,
    cells: list[tuple[CellKey, list[Record]]],
    reproducing: set[tuple[str, str, str]],
    slices: tuple[Slice, ...],
    env_rank: Mapping[str, int],
    env_order: Sequence[str],
) -> VariantAggregate:
    k_all = n_all = 0
    per_slice: dict[Slice, list[int]] = {s: [0, 0] for s in slices}
    messages: dict[tuple[str, str], list[Any]] = {}
    not_counted: dict[tuple[str, str], list[Any]] = {}
    measured: dict[Slice, set[str]] = defaultdict(set)
    reproduced: dict[Slice, set[str]] = defaultdict(set)
    runs = 0
    restricted = kind in ("workaround", "dead_end")
    for (_, env, device, precision), rs in cells:
        s = (device, precision)
        applies = not restricted or (env, device, precision) in reproducing
        for r in rs:
            runs += 1
            o = r.outcome
            exc = r.exception
            if exc is not None:
                mk = (exc.type, exc.message)
                m = messages.get(mk)
                if m is None:
                    messages[mk] = [1, {o.value}, {env}]
                else:
                    m[0] += 1
                    m[1].add(o.value)
                    m[2].add(env)
            if o in NOT_COUNTED:
                nk = (o.value, r.reason)
                m = not_counted.get(nk)
                if m is None:
                    not_counted[nk] = [1, {env}]
                else:
                    m[0] += 1
                    m[1].add(env)
                continue
            measured[s].add(env)
            if o is Outcome.REPRODUCED:
                reproduced[s].add(env)
            if not applies:
                continue
            if kind == "baseline":
                hit = o is Outcome.REPRODUCED
            elif kind == "dead_end":
                hit = o is not Outcome.OK
            else:  # workaround, control, and any unknown kind: ok counts
                hit = o is Outcome.OK
            ps = per_slice[s]
            ps[1] += 1
            n_all += 1
            if hit:
                ps[0] += 1
                k_all += 1

    def by_env(envs: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(envs, key=env_rank.__getitem__))

    ranges: list[ReproRange] = []
    if kind == "baseline":
        all_measured = set().union(*measured.values()) if measured else set()
        all_reproduced = set().union(*reproduced.values()) if reproduced else set()
        ranges.append(_range("*", by_env(all_measured), by_env(all_reproduced)))
        for s in slices:
            if s in measured:
                ranges.append(_range(slice_id(s), by_env(measured[s]), by_env(reproduced.get(s, ()))))

    msgs = sorted(
        (MessageSeen(t, msg, m[0], tuple(sorted(m[1], key=lambda x: _OUTCOME_RANK[Outcome(x)])), by_env(m[2]))
         for (t, msg), m in messages.items()),
        key=lambda m: (-m.count, m.type, m.message),
    )
    ncs = sorted(
        (NotCounted(o, reason, m[0], by_env(m[1])) for (o, reason), m in not_counted.items()),
        key=lambda m: (-m.count, m.outcome, m.reason),
    )
    return VariantAggregate(
        name=name,
        kind=kind,
        description=description,
        claim_ref=claim_ref,
        claimed_rate=claimed_rate,
        reading=reading,
        metric=METRIC.get(kind, "ok rate"),
        overall=Rate.of(k_all, n_all),
        by_slice=tuple((slice_id(s), Rate.of(*per_slice[s])) for s in slices),
        ranges=tuple(ranges),
        messages=tuple(msgs),
        not_counted=tuple(ncs),
        runs=runs,
    )


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
            return "the baseline never reproduced, so there is no cell in which to test it"
        return "none of its runs in reproducing cells was applicable (unsupported, skipped or env_failed)"
    return "all its runs were unsupported, skipped or env_failed"


def _seen_instead(v: VariantAggregate, good: str) -> MessageSeen | None:
    for m in v.messages:
        if good not in m.outcomes or len(m.outcomes) > 1:
            return m
    return None


def _verdicts(entry: Entry | None, agg: EntryAggregate) -> tuple[Verdict, ...]:
    out: list[Verdict] = []
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    workarounds = [v for v in agg.variants if v.kind == "workaround"]
    claims = entry.claims if entry is not None else None

    # the documented message
    out.append(_message_verdict(agg, baselines))

    # fix rate
    if claims is not None and claims.fix_rate is not None:
        measured_w = [w for w in workarounds if w.overall.n]
        pooled = Rate.of(sum(w.overall.k for w in workarounds), sum(w.overall.n for w in workarounds))
        if not workarounds:
            verdict, why, measured = NOT_MEASURABLE, "the entry has no workaround variant", "–"
            seen = ""
        elif not measured_w:
            verdict, why = NOT_MEASURABLE, _why_no_applicable(agg, workarounds[0])
            measured, seen = "0/0 (no applicable runs)", ""
        else:
            best = max(measured_w, key=lambda w: (w.overall.value, w.overall.n, _neg(w.name)))
            verdict, why = judge_rate(claims.fix_rate, best.overall, "")
            why = f"basis: best workaround {best.name!r}; {why}; pooled workaround runs ok: {pooled.text()}"
            measured = best.overall.text()
            seen = _message_text(_seen_instead(best, Outcome.OK.value)) if verdict == CONTRADICTED else ""
        out.append(Verdict("fix rate", "", pct(claims.fix_rate), measured, verdict, why, seen))

    # version table
    if claims is not None:
        for row in claims.version_table:
            out.append(_version_verdict(row, agg, baselines))

    # per-variant rates
    for v in agg.variants:
        if v.kind not in ("workaround", "dead_end") or (v.claim_ref is None and v.claimed_rate is None):
            continue
        what = v.claim_ref or v.kind.replace("_", " ")
        label = f"{what}: {v.metric}" + (f" ({v.reading} reading)" if v.reading else "")
        verdict, why = judge_rate(v.claimed_rate, v.overall, _why_no_applicable(agg, v))
        seen = ""
        if verdict == CONTRADICTED:
            good = Outcome.OK.value
            seen = _message_text(_seen_instead(v, good))
        out.append(
            Verdict(
                label,
                v.name,
                pct(v.claimed_rate) if v.claimed_rate is not None else "–",
                v.overall.text(),
                verdict,
                why,
                seen,
            )
        )
    return tuple(out)


def _neg(s: str) -> tuple[int, ...]:
    # for max(): ties on rate and n go to the alphabetically first name
    return tuple(-ord(c) for c in s)


def _messages_instead(baselines: list[VariantAggregate], envs: set[str] | None = None) -> str:
    """Baseline exceptions other than the documented one, most frequent first (top 3)."""
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
    claimed = f"{agg.signature_type}: {agg.signature_message}" if agg.signature_type else "–"
    k = sum(b.overall.k for b in baselines)
    n = sum(b.overall.n for b in baselines)
    seen = _messages_instead(baselines)
    if not baselines:
        return Verdict("documented message", "", claimed, "–", NOT_MEASURABLE, "the entry has no baseline variant")
    measured = f"reproduced in {k}/{n} applicable baseline runs"
    if k:
        return Verdict("documented message", "", claimed, measured, CONFIRMED, "the documented signature was raised")
    if not n:
        why = "no baseline run was applicable (all unsupported, skipped or env_failed)"
        if not any(b.runs for b in baselines):
            why = "the baseline has no runs"
        return Verdict("documented message", "", claimed, measured, NOT_MEASURABLE, why)
    why = "never seen; seen instead: " + seen if seen else "never seen; the baseline raised no exception"
    return Verdict("documented message", "", claimed, measured, CONTRADICTED, why, seen)


def _spec(spec: str) -> tuple[str, SpecifierSet] | None:
    m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(.*)$", spec)
    if not m:
        return None
    try:
        return m.group(1).lower(), SpecifierSet(m.group(2).replace(" ", ""))
    except InvalidSpecifier:
        return None


def _env_version(env: EnvInfo, package: str) -> Version | None:
    text = {"torch": env.torch, "lightning": env.lightning, "pytorch-lightning": env.lightning,
            "pytorch_lightning": env.lightning, "python": env.python}.get(package)
    return _public(_version(text))


def _version_verdict(row: Any, agg: EntryAggregate, baselines: list[VariantAggregate]) -> Verdict:
    label = f"version table: {row.spec} ({row.status})"
    claimed = row.status + "".join(
        f", {k} {v}" for k, v in (("introduced", row.introduced), ("deprecated", row.deprecated)) if v
    )
    parsed = _spec(row.spec)
    if parsed is None:
        return Verdict(label, row.spec, claimed, "–", NOT_MEASURABLE, f"cannot parse the spec {row.spec!r}")
    package, spec = parsed
    measured_envs: set[str] = set()
    reproduced_envs: set[str] = set()
    for b in baselines:
        for r in b.ranges:
            if r.slice == "*":
                measured_envs.update(r.measured)
                reproduced_envs.update(r.reproduced)
    satisfying: list[EnvInfo] = []
    for e in agg.envs:
        v = _env_version(e, package)
        if v is not None and spec.contains(v, prereleases=True):
            satisfying.append(e)
    applicable = [e for e in satisfying if e.id in measured_envs]
    rep = [e for e in applicable if e.id in reproduced_envs]
    norep = [e for e in applicable if e.id not in reproduced_envs]
    measured = f"reproduces in {len(rep)}/{len(applicable)} measured envs satisfying the spec"
    if not satisfying:
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE,
                       f"no measured environment satisfies {row.spec}")
    if not applicable:
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE,
                       "every baseline run in the environments satisfying the spec was unsupported, skipped or env_failed")
    # introduced / deprecated bounds, in the spec's package
    problems: list[str] = []
    for bound, below in (("introduced", True), ("deprecated", False)):
        raw = getattr(row, bound)
        bv = _public(_version(raw)) if raw and raw not in ("—", "-") else None
        if bv is None:
            continue
        for e in agg.envs:
            ev = _env_version(e, package)
            if ev is None or e.id not in reproduced_envs:
                continue
            if (below and ev < bv) or (not below and ev >= bv):
                problems.append(f"reproduces in {e.id}, {'before' if below else 'at/after'} {bound} {raw}")
                break
    status = row.status.strip().lower()
    if status in PRESENT_STATUSES:
        if norep:
            problems.insert(0, "does not reproduce in " + ", ".join(e.id for e in norep))
    elif status in FIXED_STATUSES:
        if rep:
            problems.insert(0, "reproduces in " + ", ".join(e.id for e in rep))
    elif not problems:
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE,
                       f"status {row.status!r} does not say whether the error occurs")
    if problems:
        seen = _messages_instead(baselines, {e.id for e in norep}) if status in PRESENT_STATUSES else ""
        return Verdict(label, row.spec, claimed, measured, CONTRADICTED, "; ".join(problems), seen)
    return Verdict(label, row.spec, claimed, measured, CONFIRMED,
                   "consistent in " + ", ".join(e.id for e in applicable))
