"""Records -> aggregates: the runs of each entry grouped into cells, counted per variant
under the counting rules of docs/verdicts.md, measured version ranges, machines. Pure
functions; no files, no clocks. The verdicts are decided in verdicts.py."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.aggregate.model import (
    _SINGLE,
    KIND_ORDER,
    METRIC,
    OUTCOME_ORDER,
    Aggregates,
    CellKey,
    CellValue,
    EntryAggregate,
    EnvInfo,
    Failure,
    Machine,
    MessageSeen,
    NotCounted,
    ReproRange,
    Slice,
    VariantAggregate,
    cell_value,
    env_info,
    slice_id,
)
from harness.aggregate.verdicts import failed_silently_as_documented
from harness.aggregate.verdicts import verdicts as _verdicts
from harness.domain import DEVICES, PRECISIONS
from harness.outcomes import NOT_COUNTED, Outcome, signature_named
from harness.records import Record
from harness.stats import Rate

if TYPE_CHECKING:
    from harness.entries import Entry

__all__ = [
    "aggregate",
    "aggregate_entries",
    "aggregate_entry",
    "entry_ids",
    "gc_paused",
    "machine_labels",
    "records_by_entry",
    "reread",
]

DEVICE_ORDER = DEVICES
PRECISION_ORDER = PRECISIONS


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
        (
            v.name,
            v.kind,
            v.description,
            v.claim_ref,
            v.claimed_rate,
            v.reading,
            v.fails_as.postconditions if v.fails_as is not None else (),
        )
        for v in declared
    ]
    specs += [(n, kinds[n], "", None, None, None, ()) for n in extra]
    for name, kind, description, claim_ref, claimed_rate, reading, fails_as in specs:
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
            fails_as=fails_as,
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
    fails_as: tuple[str, ...] = (),  # a dead end's silent documented failure (entry.yaml)
) -> tuple[VariantAggregate, int]:
    """The variant's aggregate, and how many of its runs were applicable (any cell)."""
    hits = _HITS.get(kind, _HITS_DEFAULT)
    stats: dict[int, tuple[int, int, int, int, bool, bool]] = {}  # id(cell value) -> _cell_stats
    # k, n, related, ok, silent (wrong_result runs that are the documented failure)
    per_slice: dict[Slice, list[int]] = {s: [0, 0, 0, 0, 0] for s in slices}
    by_exception: dict[int, list[Any]] = {}  # id(exception) -> [exception, count, outcomes, envs]
    not_counted: dict[tuple[str, str], list[Any]] = {}
    measured: dict[Slice, set[str]] = defaultdict(set)
    reproduced: dict[Slice, set[str]] = defaultdict(set)
    failures: dict[tuple[str, str, bool], int] = {}
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
        silent = 0
        if fails_as and n != st[3]:  # a declared silent failure: a wrong_result run counts
            silent = sum(
                failed_silently_as_documented(fails_as, _VALUE[r.outcome], r.checks) for r in rs
            )
            k += silent
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
                    documented = bool(silent) and failed_silently_as_documented(
                        fails_as, o.value, r.checks
                    )
                    fk = (o.value, text, documented)
                    failures[fk] = failures.get(fk, 0) + 1
            ps = per_slice[s]
            ps[0] += k
            ps[1] += n
            ps[2] += related
            ps[3] += ok
            ps[4] += silent

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
    silent_all = sum(ps[4] for ps in per_slice.values())
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
        silent=Rate.of(silent_all, n_all),
        fails_as=fails_as,
        failures=tuple(
            Failure(o, text, c, documented)
            for (o, text, documented), c in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
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
