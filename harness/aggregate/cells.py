"""Records -> aggregates: the runs of each entry grouped into cells, counted per variant
under the counting rules of docs/reference/outcomes-and-verdicts.md, measured version ranges, machines.

The grouping and counting are done by the columnar engine (DuckDB) over a table of records
(harness/store/columnar.py: the store's newest records as the report reads them, or any records
in hand), all entries at once; Python assembles each entry's aggregate from what the
engine grouped (per cell at most, never per record). The verdicts are decided in
verdicts.py. No files, no clocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.aggregate.advice import Change, change_texts, changes, measured_another_release
from harness.aggregate.apart import FORK_REFUSAL, FORK_WHY, documents_fork_refusal
from harness.aggregate.bottomline import bottom_line
from harness.aggregate.model import (
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
    Texts,
    Trials,
    VariantAggregate,
    cell_value_of,
    env_info,
    slice_id,
)
from harness.aggregate.stats import Rate
from harness.aggregate.verdicts import failed_silently_as_documented
from harness.aggregate.verdicts import verdicts as _verdicts
from harness.domain import DEVICES, PRECISIONS
from harness.gcpause import gc_paused
from harness.outcomes import (
    GRADES,
    NOT_COUNTED,
    SHOWS,
    Grade,
    Outcome,
    signature_named,
    whole_message,
)
from harness.spec.entries import ClaimMeaning, Variant, failure_kind, measures_kind
from harness.store.columnar import RecordTable
from harness.store.records import Record
from harness.store.sql import Params

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = [
    "aggregate",
    "aggregate_entry",
    "aggregate_table",
    "machine_labels",
    "reread",
]

_VALUES = tuple(o.value for o in OUTCOME_ORDER)
_VALUE_RANK = {v: i for i, v in enumerate(_VALUES)}
_GRADE_VALUES = tuple(g.value for g in GRADES)  # best first
_NOT_COUNTED_VALUES = tuple(o.value for o in OUTCOME_ORDER if o in NOT_COUNTED)
# per kind: the cells' counts (n_<name>) that count as a hit for its metric (among
# applicable runs): outcomes, and "shows" (a run that reads as the documented error)
_HITS = {
    "baseline": (Outcome.REPRODUCED.value,),
    # a dead end fails as documented: the documented error (read at its grade, the
    # documented text included), or its own expected one
    "dead_end": ("shows", Outcome.RELATED.value),
}
_HITS_DEFAULT = (Outcome.OK.value,)  # workaround, control, and any unknown kind
# the runs that read as the documented error (its grade: harness.outcomes.grade); they make
# a reproducing cell, and a dead end that raises one fails as documented
_SHOWS = tuple(g.value for g in sorted(SHOWS))
_RESTRICTED = ("workaround", "dead_end")  # counted only in cells where a baseline reproduces


def _in(values: Iterable[str], p: Params) -> str:
    """``(value, ...)`` for ``x IN``, each value a parameter of the statement."""
    return "(" + ", ".join(map(p, values)) + ")"


def _counts(p: Params) -> str:
    """Per outcome, the rows that ended in it: ``n_<outcome>`` columns."""
    return ", ".join(f"count(*) FILTER (WHERE outcome = {p(v)}) AS n_{v}" for v in _VALUES)


_N_COLUMNS = [f"n_{v}" for v in _VALUES]


def _slice_key(s: Slice) -> tuple[Any, ...]:
    d, p = s
    return (
        DEVICES.index(d) if d in DEVICES else len(DEVICES),
        d,
        PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS),
        p,
    )


def aggregate(records: Iterable[Record], entries: Sequence[Entry] = ()) -> Aggregates:
    """Every entry that has a definition or a record, sorted by id."""
    table = RecordTable.of(records)
    return Aggregates(tuple(aggregate_table(table, entries)), len(table))


def aggregate_entry(
    entry: Entry | None, records: Iterable[Record], *, entry_id: str | None = None
) -> EntryAggregate:
    """One entry's aggregate from its records (their ``entry`` field is not read)."""
    if entry is None and entry_id is None:
        raise ValueError("aggregate_entry needs an entry or an entry_id")
    eid = entry.id if entry is not None else str(entry_id)
    table = RecordTable.of(
        r if r.entry == eid else Record(**{**r.__dict__, "entry": eid}) for r in records
    )
    [agg] = aggregate_table(table, [entry] if entry is not None else [], ids=[eid])
    return agg


def reread(records: Sequence[Record], entry: Entry) -> Sequence[Record]:
    """Records of variants that declare their own signature, re-read against the entry as
    it is now (``related_now``). Everything else as given."""
    own = {v.name: v.signature for v in entry.variants if v.signature is not None}
    if not own:
        return records
    out = list(records)
    for i, r in enumerate(out):
        exc = r.exception
        if exc is not None and related_now(
            entry, r.variant, r.outcome.value, exc.type, exc.message
        ):
            out[i] = Record(**{**r.__dict__, "outcome": Outcome.RELATED})
    return out


def related_now(entry: Entry, variant: str, outcome: str, exc_type: str, exc_message: str) -> bool:
    """Whether a run of ``variant`` that raised ``exc_type: exc_message`` is ``related``
    when read against the entry as it is now: a ``reproduced`` run whose exception is not
    the documented one, or an ``other_error`` run whose exception is the variant's own
    (schema 2 recorded a variant's own signature as reproduced; a signature added to
    entry.yaml after the run was not known to it)."""
    own = next((v.signature for v in entry.variants if v.name == variant), None)
    if own is None:
        return False
    if outcome == Outcome.REPRODUCED.value:
        sig = entry.signature
        return not signature_named(exc_type, exc_message, sig.type, sig.message)
    if outcome == Outcome.OTHER_ERROR.value:
        return signature_named(exc_type, exc_message, own.type, own.message)
    return False


_IMPORT_TYPES = frozenset({"ImportError", "ModuleNotFoundError"})
# a package that does not import in the environment (raised directly, or reported by a tool
# the variant ran: "optimum-cli ... exited 1: ImportError: cannot import name ...")
_DOES_NOT_IMPORT = re.compile(
    r"^Failed to import \S+|\b(?:ImportError|ModuleNotFoundError): [^\n]{0,300}"
)


def _expected_error(entry: Entry, variant: str, exc_type: str, exc_message: str) -> bool:
    """Whether an exception is one the entry expects: the documented error read at its grade
    (harness.outcomes.grade, the one rule for it), or the variant's own signature."""
    if entry.grade(Outcome.OTHER_ERROR.value, exc_type, exc_message) in SHOWS:
        return True
    own = next((v.signature for v in entry.variants if v.name == variant), None)
    return own is not None and signature_named(exc_type, exc_message, own.type, own.message)


def environment_failure(exc_type: str, exc_message: str) -> str | None:
    """Why a run of a variant in an environment derived from its requirements failed for the
    environment's sake (a package of the environment does not import, or lacks what the
    variant needs), or None: the run is then read as unsupported with this reason, never as
    the advice failing."""
    first = exc_message.strip().splitlines()[0] if exc_message.strip() else ""
    if exc_type.rsplit(".", 1)[-1] in _IMPORT_TYPES:
        return f"the environment: {exc_type}: {first}"[:500]
    found = _DOES_NOT_IMPORT.search(exc_message)
    if found is not None:
        return f"the environment: {found.group(0).strip()}"[:500]
    return None


def machine_labels(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(name, id) -> how reports name the machine: its name, with the start of its id where
    two machines of one entry share a name."""
    keys = set(keys)
    names: dict[str, int] = defaultdict(int)
    for name, _ in keys:
        names[name] += 1
    return {
        (name, mid): (name or "?") + (f" ({mid[:8] or 'id unknown'})" if names[name] > 1 else "")
        for name, mid in keys
    }


# -- the engine's part ---------------------------------------------------------------------


def _unnest_table(con: Any, name: str, columns: dict[str, list[Any]], types: str) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({types})")
    if columns and next(iter(columns.values())):
        con.execute(
            f"INSERT INTO {name} SELECT " + ", ".join(["unnest(?)"] * len(columns)),
            list(columns.values()),
        )


# An absolute path into a checkout's repros/ (a message or frame that quotes the reproducer's
# file: TorchScript's and the compiler's errors do) is read from repros/ on: one error is one
# message whichever checkout or worktree ran it. The records keep the path as it was.
_CHECKOUT_PREFIX = r"""(/[^/\s"'<>:]+)+/repros/"""


def _checkout_relative(column: str, p: Params) -> str:
    return (
        f"CASE WHEN contains({column}, '/repros/') THEN "
        f"regexp_replace({column}, {p(_CHECKOUT_PREFIX)}, 'repros/', 'g') ELSE {column} END"
    )


def _runs(table: RecordTable, entries: Sequence[Entry], ids: Sequence[str] | None) -> None:
    """Table ``runs``: the records as the aggregation reads them (a variant's own expected
    error re-read as ``related`` against the entry as it is now, and a ``related`` run of a
    variant that no longer declares one as ``other_error``); only those of the entries
    ``ids`` where given."""
    con = table.con
    wanted = "true"
    if ids is not None:
        _unnest_table(con, "wanted", {"entry": list(ids)}, "entry VARCHAR")
        wanted = "entry IN (SELECT entry FROM wanted)"
    _flips(con, entries, wanted)
    _environment_failures(con, entries, wanted)
    wanted += _undeclared_and_rewritten(con, entries)
    # version advice that measured another release where the cell already satisfied it:
    # not the cell's answer, listed apart (not counted, with why)
    p = Params()
    _set_apart(con, wanted, p, entries)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE apart_runs AS SELECT entry, variant, env, outcome, why "
        "FROM records JOIN apart USING (rid)"
    )
    wanted += " AND rid NOT IN (SELECT rid FROM apart)"
    # the runs as read, before their grades: a statement, not a table (a table of it would be
    # one more copy of every run; the graded exceptions read only five of its columns)
    p = Params()
    read = (
        "SELECT rid, entry, variant, kind, env, device, "
        "precision, trial, CASE WHEN rid IN (SELECT rid FROM flips) THEN 'related' "
        "WHEN rid IN (SELECT rid FROM env_fail) THEN 'unsupported' "
        "WHEN outcome = 'related' AND has_exception AND EXISTS (SELECT 1 FROM undeclared u "
        "WHERE u.entry = records.entry AND u.variant = records.variant) THEN 'other_error' "
        "ELSE outcome END AS outcome, coalesce((SELECT why FROM env_fail e WHERE e.rid = "
        "records.rid), reason) AS reason, has_exception AND rid NOT IN (SELECT rid FROM "
        "env_fail) AS has_exception, exc_type, "
        f"{_checkout_relative('exc_message', p)} AS exc_message, "
        f"{_checkout_relative('exc_frame', p)} AS exc_frame, "
        f"duration_s, versions, provenance, started_at, machine, machine_id, checks, ran_in, "
        f"requires FROM records WHERE {wanted}"
    )
    _graded(con, {e.id: e for e in entries}, read, dict(p.values))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE runs AS SELECT r.*, CASE "
        f"WHEN r.outcome IN {_in(_NOT_COUNTED_VALUES, p)} THEN NULL "
        f"WHEN r.outcome = 'reproduced' THEN coalesce(g.grade, {p(Grade.VERBATIM.value)}) "
        f"WHEN r.outcome IN ('ok', 'wrong_result') THEN {p(Grade.NOT_RAISED.value)} "
        f"WHEN r.outcome = 'other_error' AND g.grade IS NOT NULL THEN g.grade "
        f"ELSE {p(Grade.OTHER_ERROR.value)} END AS grade FROM ({read}) r LEFT JOIN graded g "
        "ON r.outcome = g.outcome AND g.entry = r.entry AND g.exc_type = r.exc_type "
        "AND g.exc_message = r.exc_message",
        p.values,
    )


def _flips(con: Any, entries: Sequence[Entry], wanted: str) -> None:
    """Table ``flips``: the runs whose exception is now their variant's own expected error."""
    own = {(e.id, v.name): e for e in entries for v in e.variants if v.signature is not None}
    flips: list[int] = []
    if own:
        _unnest_table(
            con,
            "own",
            {"entry": [k[0] for k in own], "variant": [k[1] for k in own]},
            "entry VARCHAR, variant VARCHAR",
        )
        for rid, eid, variant, outcome, exc_type, exc_message in con.execute(
            "SELECT rid, entry, variant, outcome, exc_type, exc_message FROM records "
            "SEMI JOIN own USING (entry, variant) WHERE has_exception "
            f"AND outcome IN ('reproduced', 'other_error') AND {wanted}"
        ).fetchall():
            if related_now(own[(eid, variant)], variant, outcome, exc_type, exc_message):
                flips.append(rid)
    _unnest_table(con, "flips", {"rid": flips}, "rid BIGINT")


def _environment_failures(con: Any, entries: Sequence[Entry], wanted: str) -> None:
    """Table ``env_fail``: the runs of derived environments that failed for the environment."""
    # a package brought in by a variant's requirements (a derived environment) that does not
    # import, or lacks what the variant needs, is the environment's failure, not the
    # advice's: read as unsupported, with the reason (environment_failure)
    derived = {(e.id, v.name): e for e in entries for v in e.variants if e.requirements_for(v)}
    env_failed: dict[str, list[Any]] = {"rid": [], "why": []}
    if derived:
        _unnest_table(
            con,
            "derived",
            {"entry": [k[0] for k in derived], "variant": [k[1] for k in derived]},
            "entry VARCHAR, variant VARCHAR",
        )
        for rid, eid, variant, exc_type, exc_message in con.execute(
            "SELECT rid, entry, variant, exc_type, exc_message FROM records SEMI JOIN derived "
            "USING (entry, variant) WHERE has_exception AND outcome = 'other_error' AND rid NOT IN "
            f"(SELECT rid FROM flips) AND {wanted}"
        ).fetchall():
            entry = derived[(eid, variant)]
            why = environment_failure(exc_type, exc_message)
            if why is not None and not _expected_error(entry, variant, exc_type, exc_message):
                env_failed["rid"].append(rid)
                env_failed["why"].append(why)
    _unnest_table(con, "env_fail", env_failed, "rid BIGINT, why VARCHAR")


def _undeclared_and_rewritten(con: Any, entries: Sequence[Entry]) -> str:
    """Tables ``undeclared`` and ``rewritten``; returns the condition that keeps a
    rewritten variant's older runs out."""
    # a related run of a variant that declares no signature now (its declaration removed
    # since): its exception was checked against the documented signature first and did not
    # match it, so it is another error, read at its grade like any other
    undeclared = [(e.id, v.name) for e in entries for v in e.variants if v.signature is None]
    _unnest_table(
        con,
        "undeclared",
        {"entry": [k[0] for k in undeclared], "variant": [k[1] for k in undeclared]},
        "entry VARCHAR, variant VARCHAR",
    )
    # a variant whose code changed what it measures reads only the records made since; a
    # retired one none
    rewritten = [(e.id, v.name, v.rewritten) for e in entries for v in e.variants if v.rewritten]
    # a retired variant's records are not read at all (as if rewritten after all of them)
    rewritten += [(e.id, name, "\uffff") for e in entries for name in e.retired]
    _unnest_table(
        con,
        "rewritten",
        {name: [r[i] for r in rewritten] for i, name in enumerate(("entry", "variant", "since"))},
        "entry VARCHAR, variant VARCHAR, since VARCHAR",
    )
    return (
        " AND NOT EXISTS (SELECT 1 FROM rewritten w WHERE w.entry = records.entry AND "
        "w.variant = records.variant AND records.started_at < w.since)"
    )


def _graded(con: Any, entries: Mapping[str, Entry], read: str, params: Mapping[str, Any]) -> None:
    """Table ``graded``: the other_error exceptions of the defined entries that read as the
    documented error all the same (harness.outcomes.grade: variable-parts, reworded, or the
    documented text itself), and the reproduced ones of entries whose document says more than
    its signature reads (verbatim only where torch says all of it), each distinct (outcome,
    type, message) once, graded in Python. ``read``: the statement of the runs as read
    (_runs), ``params`` its parameters."""
    rows: dict[str, list[str]] = {
        "entry": [],
        "outcome": [],
        "exc_type": [],
        "exc_message": [],
        "grade": [],
    }
    if entries:
        wholes = {
            eid: whole_message(
                str(e.origin.get("message") or ""), e.signature.type, e.signature.message
            )
            for eid, e in entries.items()
        }
        _unnest_table(
            con,
            "defined",
            {"entry": list(entries), "long": [bool(wholes[e]) for e in entries]},
            "entry VARCHAR, long BOOLEAN",
        )
        for eid, outcome, exc_type, exc_message in con.execute(
            f"SELECT DISTINCT entry, outcome, exc_type, exc_message FROM ({read}) JOIN defined "
            "USING (entry) WHERE has_exception AND (outcome = 'other_error' OR "
            "(outcome = 'reproduced' AND long))",
            params,
        ).fetchall():
            g = entries[eid].grade(outcome, exc_type, exc_message, wholes[eid])
            if g is not None and g is not Grade.OTHER_ERROR:
                values = (eid, outcome, exc_type, exc_message, g.value)
                for key, value in zip(rows, values, strict=True):
                    rows[key].append(value)
    _unnest_table(
        con,
        "graded",
        rows,
        "entry VARCHAR, outcome VARCHAR, exc_type VARCHAR, exc_message VARCHAR, grade VARCHAR",
    )


@dataclass
class _Grouped:
    """What the engine grouped, per entry."""

    cells: dict[str, dict[CellKey, CellValue]]
    first_kind: dict[str, dict[str, str]]  # entry -> variant -> kind of its first record
    runs: dict[str, int]
    envs: dict[str, list[tuple[str, str, str, str]]]  # (env, python, torch, lightning)
    machines: dict[str, list[tuple[Any, ...]]]
    newest: dict[str, str]
    # version advice: (entry, variant) -> what its requirements changed, per environment
    changed: dict[tuple[str, str], list[tuple[str, Change]]]  # (env, per package)
    requires: dict[tuple[str, str], tuple[str, ...]]  # as the records name them


# whether a cell's runs come from more than one machine (machine, machine_id): one of the two
# not the same in every run (a NULL beside a value included). count(DISTINCT (machine,
# machine_id)) > 1 says the same; the cells' table took 0.28 s with it at 200k runs, 0.18 s
# with this
_SEVERAL_MACHINES = (
    "("
    + " OR ".join(
        f"min({c}) IS DISTINCT FROM max({c}) OR count({c}) NOT IN (0, count(*))"
        for c in ("machine", "machine_id")
    )
    + ")"
)


def _group(con: Any) -> _Grouped:
    p = Params()
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cells AS SELECT entry, variant, env, device, precision, "
        f"count(*) AS trials, {_counts(p)}, {_SEVERAL_MACHINES} AS several_machines, "
        f"count(*) FILTER (WHERE grade IN {_in(_SHOWS, p)}) AS n_shows FROM runs GROUP BY ALL",
        p.values,
    )
    # each distinct count vector once (cells mostly share a handful)
    signatures = con.execute(
        f"SELECT DISTINCT {', '.join(_N_COLUMNS)} FROM cells ORDER BY ALL"
    ).fetchall()
    values = [cell_value_of(dict(zip(_VALUES, counts, strict=True))) for counts in signatures]
    _unnest_table(
        con,
        "signatures",
        {
            "sig": list(range(len(signatures))),
            **{c: [s[i] for s in signatures] for i, c in enumerate(_N_COLUMNS)},
        },
        "sig BIGINT, " + ", ".join(f"{c} BIGINT" for c in _N_COLUMNS),
    )
    fetched = con.execute(
        "SELECT entry, variant, env, device, precision, sig FROM cells "
        f"JOIN signatures USING ({', '.join(_N_COLUMNS)}) ORDER BY entry"
    ).fetchnumpy()
    keys: list[CellKey] = list(
        zip(
            fetched["variant"].tolist(),
            fetched["env"].tolist(),
            fetched["device"].tolist(),
            fetched["precision"].tolist(),
            strict=True,
        )
    )
    cell_values = list(map(values.__getitem__, fetched["sig"].tolist()))
    cells = {
        eid: dict(zip(keys[lo:hi], cell_values[lo:hi], strict=True))
        for eid, lo, hi in _spans(fetched["entry"])
    }

    first_kind: dict[str, dict[str, str]] = defaultdict(dict)
    runs: dict[str, int] = defaultdict(int)
    for eid, variant, kind, n in con.execute(
        "SELECT entry, variant, arg_min(kind, rid), count(*) FROM runs GROUP BY ALL "
        "ORDER BY entry, min(rid)"
    ).fetchall():
        first_kind[eid][variant] = kind
        runs[eid] += n

    envs: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    # an environment's versions are those of the runs in it, not of the runs of version
    # advice that answer for it (they ran in an environment derived from it)
    for eid, *row in con.execute(
        "SELECT entry, env, "
        + ", ".join(
            "coalesce(min(nullif(CASE WHEN ran_in = '' THEN "
            f"json_extract_string(versions, '$.{f}') END, '')), '')"
            for f in ("python", "torch", "lightning")
        )
        + " FROM (SELECT entry, env, ran_in, versions FROM runs UNION ALL SELECT entry, env, "
        "'apart' AS ran_in, '{}' AS versions FROM apart_runs) GROUP BY ALL"
    ).fetchall():
        envs[eid].append(tuple(row))  # type: ignore[arg-type]

    machines = _machines_of_entries(con)
    newest = dict(con.execute("SELECT entry, max(started_at) FROM runs GROUP BY entry").fetchall())
    changed, requires = _advice(con)
    return _Grouped(cells, first_kind, runs, envs, machines, newest, changed, requires)


def _machines_of_entries(con: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Per entry, its machines with their provenance, runs and first and last start."""
    # per machine and provenance first (a few per entry), its fields read from those
    fields = ", ".join(
        f"coalesce(json_extract_string(provenance, '$.{f}'), '') AS p_{f}" for f in Machine.FIELDS
    )
    machines: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in con.execute(
        f"SELECT entry, machine, machine_id, {', '.join('p_' + f for f in Machine.FIELDS)}, "
        "sum(n), coalesce(min(first), ''), max(last) FROM (SELECT *, "
        f"{fields} FROM (SELECT entry, machine, machine_id, provenance, count(*) AS n, "
        "min(nullif(started_at, '')) AS first, max(started_at) AS last FROM runs GROUP BY ALL)) "
        "GROUP BY ALL"
    ).fetchall():
        machines[row[0]].append(row[1:])
    return machines


def _advice(
    con: Any,
) -> tuple[dict[tuple[str, str], list[tuple[str, Change]]], dict[tuple[str, str], tuple[str, ...]]]:
    """Per variant of version advice: what its requirements changed in each environment
    (its runs' versions against those of a run in the environment itself, else the versions
    the environment's id names), what the environment already satisfied (the runs that
    kept its release: ``ran_in`` empty, ``requires`` not), and its requirements as its
    records name them."""
    # the runs that had their environment: not those that could not build or resolve it
    # (their versions are what was requested: torch_requested, ...)
    advised = con.execute(
        "SELECT DISTINCT entry, variant, env, requires, versions FROM runs WHERE "
        f"{_ADVISED} AND json_extract_string(versions, '$.torch_requested') IS NULL "
        "ORDER BY ALL"
    ).fetchall()
    if not advised:
        return {}, {}
    own = _own_versions(con, "runs")
    changed: dict[tuple[str, str], list[tuple[str, Change]]] = defaultdict(list)
    requires: dict[tuple[str, str], tuple[str, ...]] = {}
    for eid, variant, env, wanted, versions in advised:
        wanted = json.loads(wanted)
        requires.setdefault((eid, variant), tuple(wanted.values()))
        for change in changes(_row_versions(env, own), json.loads(versions), wanted):
            changed[(eid, variant)].append((env, change))
    return changed, requires


# a run of version advice: in an environment derived from its cell, or in the cell itself
# where the cell already satisfied every requirement (schema 5 records of either)
_ADVISED = "(ran_in <> '' OR len(json_keys(requires)) > 0)"


def _own_versions(con: Any, table: str) -> dict[str, str]:
    """Per environment, the versions of one run in it (not of version advice that ran
    elsewhere): what the cell itself has."""
    return dict(
        con.execute(
            f"SELECT env, arg_min(versions, rid) FROM {table} WHERE ran_in = '' AND env IN "
            f"(SELECT env FROM {table} WHERE {_ADVISED}) "
            "AND json_extract_string(versions, '$.torch') IS NOT NULL GROUP BY env"
        ).fetchall()
    )


def _row_versions(env: str, own: Mapping[str, str]) -> dict[str, str]:
    named = env_info(env)
    row = {"python": named.python, "torch": named.torch, "lightning": named.lightning}
    row.update(json.loads(own[env]) if env in own else {})
    return row


def _set_apart(con: Any, wanted: str, p: Params, entries: Sequence[Entry]) -> None:
    """Table ``apart``: the runs of version advice that measured another release in a cell
    that already satisfied every requirement (advice.measured_another_release), and the runs
    torch refused CUDA in for the harness's own fork (apart.py), each with why; they are not
    read as the cell's answer, and are listed as not counted."""
    rows: dict[str, list[Any]] = {"rid": [], "why": []}
    documenting, q = [e.id for e in entries if documents_fork_refusal(e)], Params()
    for (rid,) in con.execute(
        f"SELECT rid FROM records WHERE isolation = 'fork' AND has_exception AND contains("
        f"exc_message, {q(FORK_REFUSAL)}) AND NOT list_contains({q(documenting)}::VARCHAR[], "
        f"entry) AND {wanted}",
        q.values,
    ).fetchall():
        rows["rid"].append(rid)
        rows["why"].append(FORK_WHY)
    derived = con.execute(
        "SELECT rid, env, requires, versions FROM records WHERE ran_in <> '' AND "
        f"json_extract_string(versions, '$.torch_requested') IS NULL AND {wanted}",
        p.values,
    ).fetchall()
    if derived:
        own = _own_versions(con, "records")
        for rid, env, requires, versions in derived:
            why = measured_another_release(
                _row_versions(env, own), json.loads(versions), json.loads(requires)
            )
            if why and rid not in rows["rid"]:  # (a run set apart once)
                rows["rid"].append(rid)
                rows["why"].append(why)
    _unnest_table(con, "apart", rows, "rid BIGINT, why VARCHAR")


@dataclass(frozen=True)
class _Spec:
    """A variant as the aggregate lists it: declared by the entry, or only in the records."""

    name: str
    kind: str
    description: str
    claim_ref: str | None
    claimed_rate: float | None
    reading: str | None
    scope: int  # 3: counted in cells (env, device, precision) where a baseline reproduces; 2: (env, device)
    fails_as: tuple[str, ...] = ()  # a dead end's silent documented failure (entry.yaml)
    requires: tuple[str, ...] = ()  # version advice: what it adds to its cells' requirements
    # the baselines whose reproducing cells judge it (entry.yaml baselines); (): every one
    judged_by: tuple[str, ...] = ()
    # a dead end: whether an error (the documented one, or its own signature's) is its
    # documented failure (claim kind "raises"); a substitute error confirms nothing else
    errors: bool = True
    meaning: ClaimMeaning = ClaimMeaning()
    measured_kind: str | None = None  # the documented kind its runs can show, or None

    @property
    def role(self) -> tuple[str, str, int, str, bool]:
        """What its counts depend on besides its cells: kind, scope, silent failure, and
        whether an error is its documented failure."""
        return (self.name, self.kind, self.scope, "\x00".join(self.fails_as), self.errors)


def _specs(entry: Entry | None, first_kind: Mapping[str, str]) -> tuple[list[_Spec], set[str]]:
    """The variants in the aggregate's order (the entry's, then any only the records name),
    and the names whose cells decide where the documented error reproduces."""
    declared = list(entry.variants) if entry is not None else []
    declared_names = {v.name for v in declared}
    extra = sorted(
        (n for n in first_kind if n not in declared_names),
        key=lambda n: (
            KIND_ORDER.index(first_kind[n]) if first_kind[n] in KIND_ORDER else 9,
            n,
        ),
    )
    baselines = {v.name for v in declared if v.kind == "baseline"} | {
        n for n in extra if first_kind[n] == "baseline"
    }
    baseline_precisions = {p for v in declared if v.kind == "baseline" for p in v.precisions}
    specs = [
        _Spec(
            v.name,
            v.kind,
            v.description,
            v.claim_ref,
            v.claimed_rate,
            v.reading,
            # a workaround that changes the precision itself counts across precisions
            2 if v.kind in _RESTRICTED and not set(v.precisions) & baseline_precisions else 3,
            # a dead end's silent failure counts where it measures the documented kind
            v.fails_as.postconditions
            if v.fails_as is not None and measures_kind(v) == v.fails_as.measures
            else (),
            entry.requirements_for(v) if entry is not None else (),
            v.baselines,
            v.kind != "dead_end" or measures_kind(v) == "raises",
            dataclasses.replace(v.meaning, kind=_claim_kind(v)),
            measures_kind(v) if v.kind == "dead_end" else None,
        )
        for v in declared
    ]
    specs += [_Spec(n, first_kind[n], "", None, None, None, 3) for n in extra]
    return specs, baselines


def _claim_kind(v: Variant) -> str | None:
    """What a workaround promises (a fix unless declared a diagnostic), what a dead end's
    documented failure is (entries.failure_kind); None for the other kinds."""
    if v.kind == "dead_end":
        return failure_kind(v)
    if v.kind == "workaround":
        return v.meaning.kind or "fix"
    return None


def _hits(kind: str) -> tuple[str, ...]:
    return _HITS.get(kind, _HITS_DEFAULT)


def _sum(columns: Iterable[str]) -> str:
    return " + ".join(columns) or "0"


@dataclass
class _VariantRows:
    """What the engine counted per variant (by entry, name, kind and scope)."""

    # runs, counted scenarios, hits anywhere, counted trials (the entry's "N runs (M applicable)")
    totals: dict[tuple[Any, ...], tuple[int, int, int, int]]
    per_slice: dict[tuple[Any, ...], list[tuple[Any, ...]]]  # (d, p, k, n, related, ok, silent)
    ranges: dict[tuple[Any, ...], list[tuple[Any, ...]]]  # (d, p, env, reproduced)
    failures: dict[tuple[Any, ...], list[tuple[str, str, bool, int]]]
    messages: dict[tuple[str, str], list[tuple[Any, ...]]]  # by (entry, name)
    not_counted: dict[tuple[str, str], list[tuple[Any, ...]]]
    env_shows: dict[tuple[Any, ...], list[tuple[Any, ...]]]  # baselines: (env, shows, n)
    grades: dict[tuple[str, str], list[tuple[Any, ...]]]  # baselines, by (entry, name)
    # (env, k, n, k anywhere, n anywhere, ok of n)
    by_env: dict[tuple[Any, ...], list[tuple[Any, ...]]]
    # the cells whose runs are counted in the metric: (env, device, precision)
    scope: dict[tuple[Any, ...], list[tuple[str, str, str]]] = field(default_factory=dict)
    # the environments where a counted scenario is flaky (its trials disagree)
    flaky: dict[tuple[Any, ...], list[tuple[str]]] = field(default_factory=dict)


def _count_variants(
    con: Any,
    roles: list[tuple[str, str, str, int, str]],
    baselines: list[tuple[str, str]],
    judged: Sequence[tuple[str, str, str]] = (),
    silent_baselines: Sequence[tuple[str, str, str]] = (),
) -> _VariantRows:
    """``roles``: (entry, variant, kind, scope, fails: the postconditions of its silent
    documented failure, NUL-separated); ``judged``: (entry, variant, baseline) where a
    variant names the baselines whose reproducing cells judge it."""
    _score(con, roles, baselines, judged, silent_baselines)
    return _variant_rows(con, roles)


def _score(
    con: Any,
    roles: list[tuple[str, str, str, int, str]],
    baselines: list[tuple[str, str]],
    judged: Sequence[tuple[str, str, str]] = (),
    silent_baselines: Sequence[tuple[str, str, str]] = (),
) -> None:
    """Table scored: per variant role and cell, the runs counted (n), the hits (k: what the
    role counts as its success or failure, silent documented failures included), and
    whether the cell is in the role's scope (where a baseline reproduces, for those
    restricted to it); table silent: the runs that failed silently as documented. Each role
    is numbered ``r``, its position in ``roles``: the queries over scored group by that
    number, not by the six columns it stands for."""
    names = ("entry", "variant", "kind", "scope", "fails", "errors")
    _unnest_table(
        con,
        "roles",
        {"r": list(range(len(roles))), **{n: [r[i] for r in roles] for i, n in enumerate(names)}},
        "r BIGINT, entry VARCHAR, variant VARCHAR, kind VARCHAR, scope BIGINT, fails VARCHAR, "
        "errors BOOLEAN",
    )
    _unnest_table(
        con,
        "baselines",
        {"entry": [b[0] for b in baselines], "variant": [b[1] for b in baselines]},
        "entry VARCHAR, variant VARCHAR",
    )
    _silent_runs(con, silent_baselines)
    counted = f"trials - ({_sum('n_' + v for v in _NOT_COUNTED_VALUES)})"
    p = Params()
    hits = _hits_sql(p)
    # a reproducing cell: a baseline's run there shows the documented error at its grade;
    # per variant, of the baselines that judge it (all of the entry's, unless it names some:
    # then a named baseline's own error, its signature's, makes the cell too, since the
    # variant says it answers that baseline: the Trainer's related error for its solution)
    _unnest_table(
        con,
        "judged",
        {name: [j[i] for j in judged] for i, name in enumerate(("entry", "variant", "baseline"))},
        "entry VARCHAR, variant VARCHAR, baseline VARCHAR",
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE reproducing AS SELECT DISTINCT roles.entry, "
        "roles.variant, env, device, precision FROM cells JOIN baselines USING (entry, variant) "
        "JOIN roles ON roles.entry = cells.entry WHERE (n_shows > 0 AND NOT EXISTS (SELECT 1 "
        "FROM judged WHERE judged.entry = roles.entry AND judged.variant = roles.variant)) OR "
        "((n_shows + n_related > 0 OR (cells.entry, cells.variant, env, device, precision) IN "
        "(SELECT (entry, variant, env, device, precision) FROM cell_situation)) AND "
        "(roles.entry, roles.variant, cells.variant) IN "
        "(SELECT (entry, variant, baseline) FROM judged))"
    )
    _score_trials(con, counted, hits, p)
    # a scenario is one cell of one variant (a reading x release x device x precision): the
    # unit every count below is in. Its trials only settle whether it is flaky: it counts as
    # a hit (ok, related, silent) where every counted trial was one, and it shows the
    # documented error where any trial did (one sighting is a sighting)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE scored AS SELECT r, entry, variant, kind, scope, fails, "
        "errors, env, device, precision, trials, (t_n > 0)::BIGINT AS n, "
        "(t_n > 0 AND t_k >= t_n)::BIGINT AS k, (t_k > 0 AND t_k < t_n)::BIGINT AS flaky, "
        "(t_n > 0 AND t_related >= t_n)::BIGINT AS related, "
        "(t_n > 0 AND t_ok >= t_n)::BIGINT AS ok, (t_n > 0 AND t_silent >= t_n)::BIGINT AS silent, "
        "(t_shows > 0)::BIGINT AS shows, has_reproduced, in_scope, t_n FROM scored_trials"
    )


def _silent_runs(con: Any, silent_baselines: Sequence[tuple[str, str, str]]) -> None:
    """Tables ``situations``, ``silent``, ``cell_silent`` and ``cell_situation``: the runs
    that failed silently as documented, and the cells where they did."""
    # a baseline whose documented situation fails silently (entry.yaml fails_as with
    # instead): the cells where one of its runs failed so reproduce the situation for the
    # variants that name it, as a declared error of torch's own words does
    _unnest_table(
        con,
        "situations",
        {
            name: [b[i] for b in silent_baselines]
            for i, name in enumerate(("entry", "variant", "fails"))
        },
        "entry VARCHAR, variant VARCHAR, fails VARCHAR",
    )
    # a silent documented failure (verdicts.failed_silently_as_documented), run by run: the
    # wrong_result runs of the dead ends that declare one, and of those baselines
    silent: dict[str, list[int]] = {"fails": [], "rid": []}
    for rid, fails, checks in con.execute(
        "SELECT rid, fails, checks FROM runs JOIN (SELECT DISTINCT entry, variant, fails FROM "
        "roles WHERE fails <> '' UNION SELECT entry, variant, fails FROM situations) "
        "USING (entry, variant) WHERE outcome = 'wrong_result'"
    ).fetchall():
        if failed_silently_as_documented(fails.split("\x00"), "wrong_result", json.loads(checks)):
            silent["fails"].append(fails)
            silent["rid"].append(rid)
    _unnest_table(con, "silent", silent, "fails VARCHAR, rid BIGINT")
    # (a baseline's role has no fails: its silent runs join no role's counts below)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cell_silent AS SELECT entry, variant, env, device, "
        "precision, fails, count(*) AS silent FROM runs JOIN silent USING (rid) GROUP BY ALL"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cell_situation AS SELECT DISTINCT entry, variant, env, "
        "device, precision FROM cell_silent SEMI JOIN situations USING (entry, variant, fails)"
    )


def _hits_sql(p: Params) -> str:
    """What a role counts as its hits, per kind, as SQL over a cell's counts."""
    # (an error counts for a dead end only where an error is its documented failure)
    return (
        "CASE kind "
        + "".join(
            f"WHEN {p(k)} THEN "
            + (
                f"CASE WHEN errors THEN {_sum('n_' + v for v in _hits(k))} ELSE 0 END "
                if k == "dead_end"
                else f"{_sum('n_' + v for v in _hits(k))} "
            )
            for k in _HITS
        )
        + f"ELSE {_sum('n_' + v for v in _HITS_DEFAULT)} END"
    )


def _score_trials(con: Any, counted: str, hits: str, p: Params) -> None:
    """Table scored_trials: per variant role and cell, the trials counted (t_n), the hits
    (t_k), and whether the cell is in the role's scope."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE scored_trials AS SELECT roles.r, roles.entry, "
        "roles.variant, roles.kind, roles.scope, roles.fails, roles.errors, env, device, "
        "precision, trials, "
        f"{counted} AS t_n, {hits} + coalesce(cell_silent.silent, 0) AS t_k, "
        "CASE WHEN errors THEN n_related ELSE 0 END AS t_related, "
        "n_ok AS t_ok, coalesce(cell_silent.silent, 0) AS t_silent, n_shows AS t_shows, "
        "n_shows > 0 AS has_reproduced, "
        f"(roles.kind NOT IN {_in(_RESTRICTED, p)} OR (roles.scope = 3 AND (entry, variant, env, "
        "device, precision) IN (SELECT (entry, variant, env, device, precision) FROM "
        "reproducing)) OR (roles.scope = 2 AND (entry, variant, env, device) IN (SELECT "
        "(entry, variant, env, device) FROM reproducing))) AS in_scope "
        "FROM cells JOIN roles USING (entry, variant) "
        "LEFT JOIN cell_silent USING (entry, variant, env, device, precision, fails)",
        p.values,
    )


def _spans(column: np.ndarray) -> list[tuple[Any, int, int]]:
    """Where ``column`` (ordered by it) holds each value: (value, first row, past its last)."""
    cuts = [0, *(np.flatnonzero(column[1:] != column[:-1]) + 1).tolist(), len(column)]
    return [(column[lo], lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]


def _by_role(
    fetched: Mapping[str, np.ndarray], columns: Sequence[str], roles: Sequence[tuple[Any, ...]]
) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
    """The rows of a query ordered by role number (column ``r``), per role: the values of
    ``columns``, a tuple a row (fetched a column at a time: no tuple per row from the engine)."""
    rows = list(zip(*(fetched[c].tolist() for c in columns), strict=True))
    return {
        roles[int(r)]: rows[lo:hi] for r, lo, hi in _spans(np.asarray(fetched["r"], dtype=np.int64))
    }


def _grades(con: Any) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Per baseline, its grades and in how many scenarios each."""
    grades: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in con.execute(
        "SELECT entry, variant, grade, count(DISTINCT (env, device, precision)) FROM runs "
        "SEMI JOIN baselines "
        "USING (entry, variant) WHERE grade IS NOT NULL GROUP BY ALL"
    ).fetchall():
        grades[(row[0], row[1])].append(tuple(row[2:]))
    return grades


def _messages(con: Any) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Per variant, the messages its runs raised: in how many scenarios, with which
    outcomes, in which environments, at which best grade."""
    messages: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    # each message's best grade ("" when none: not counted) picked by the engine: a list of
    # its grades, for Python to pick from, doubled the query's time
    p = Params()
    for row in con.execute(
        "SELECT entry, variant, exc_type, exc_message, count(DISTINCT (env, device, precision)), "
        "list(DISTINCT outcome), "
        "list(DISTINCT env), coalesce(arg_min(grade, list_position("
        f"{p(_GRADE_VALUES)}::VARCHAR[], grade)), '') FROM runs WHERE has_exception GROUP BY ALL",
        p.values,
    ).fetchall():
        messages[(row[0], row[1])].append(row[2:])
    return messages


def _not_counted(con: Any) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Per variant, the runs not counted and the runs set apart, with why."""
    not_counted: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    p = Params()
    for row in con.execute(
        "SELECT entry, variant, outcome, reason, count(*), list(DISTINCT env) FROM runs "
        f"WHERE outcome IN {_in(_NOT_COUNTED_VALUES, p)} GROUP BY ALL",
        p.values,
    ).fetchall():
        not_counted[(row[0], row[1])].append(row[2:])
    for row in con.execute(
        "SELECT entry, variant, outcome, why, count(*), list(DISTINCT env) FROM apart_runs "
        "GROUP BY ALL"
    ).fetchall():
        not_counted[(row[0], row[1])].append(row[2:])
    return not_counted


def _failures_sql(p: Params) -> str:
    """Per variant role, how its counted runs failed where it is in scope: the text, whether
    it failed as documented, in how many scenarios."""
    return (
        "SELECT scored.r, runs.outcome, CASE WHEN has_exception THEN exc_type || ': ' || "
        "exc_message ELSE runs.outcome || ': ' || reason END AS text, silent.rid IS NOT NULL OR "
        "(scored.kind = 'dead_end' AND scored.errors AND runs.outcome = 'other_error' "
        f"AND runs.grade IN {_in(_SHOWS, p)}) AS documented, "
        # in scenarios: the cells whose runs ended so
        "count(DISTINCT (scored.env, scored.device, scored.precision)) AS c "
        "FROM runs JOIN scored USING (entry, variant, env, device, precision) "
        "LEFT JOIN silent ON silent.rid = runs.rid AND silent.fails = scored.fails "
        "WHERE scored.n > 0 AND scored.n <> scored.ok AND in_scope "
        f"AND runs.outcome NOT IN {_in(('ok', *_NOT_COUNTED_VALUES), p)} GROUP BY ALL "
        "ORDER BY scored.r"
    )


def _variant_rows(con: Any, roles: Sequence[tuple[Any, ...]]) -> _VariantRows:
    """What table scored (and runs) give per variant role: totals, per slice, version
    ranges, failures, messages and the runs not counted. Per role, by its number ``r`` (a
    sum of BIGINTs is a HUGEINT, which the engine hands over as a float: cast back)."""

    def by_role(
        sql: str, columns: str, params: Mapping[str, Any] | None = None
    ) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
        fetched = con.execute(sql, params or {}).fetchnumpy()
        return _by_role(fetched, columns.split(), roles)

    totals = {
        role: rows[0]
        for role, rows in by_role(
            "SELECT r, sum(trials)::BIGINT AS runs, sum(n)::BIGINT AS n, sum(k)::BIGINT AS k, "
            "sum(t_n)::BIGINT AS t_n FROM scored GROUP BY r ORDER BY r",
            "runs n k t_n",
        ).items()
    }
    per_slice = by_role(
        "SELECT r, device, precision, sum(k)::BIGINT AS k, sum(n)::BIGINT AS n, "
        "sum(related)::BIGINT AS related, sum(ok)::BIGINT AS ok, sum(silent)::BIGINT AS silent, "
        "sum(shows)::BIGINT AS shows FROM scored WHERE n > 0 AND in_scope GROUP BY ALL ORDER BY r",
        "device precision k n related ok silent shows",
    )
    env_shows = by_role(
        "SELECT r, env, sum(shows)::BIGINT AS shows, sum(n)::BIGINT AS n FROM scored "
        "WHERE n > 0 AND kind = 'baseline' GROUP BY ALL ORDER BY r",
        "env shows n",
    )
    # the metric per environment: the reproducing-cell rule looks no further than one
    # environment's cells, so the rate of any set of environments is the sum of theirs (the
    # page's answer for some versions adds them up as explain aggregates their records)
    by_env = by_role(
        "SELECT r, env, coalesce(sum(k) FILTER (WHERE in_scope), 0)::BIGINT AS k, "
        "coalesce(sum(n) FILTER (WHERE in_scope), 0)::BIGINT AS n, sum(k)::BIGINT AS ka, "
        "sum(n)::BIGINT AS na, coalesce(sum(ok) FILTER (WHERE in_scope), 0)::BIGINT AS ok "
        "FROM scored WHERE n > 0 GROUP BY ALL ORDER BY r",
        "env k n ka na ok",
    )
    scope = by_role(
        "SELECT r, env, device, precision FROM scored WHERE n > 0 AND in_scope ORDER BY r",
        "env device precision",
    )
    flaky = by_role(
        "SELECT DISTINCT r, env FROM scored WHERE flaky > 0 AND in_scope ORDER BY r", "env"
    )
    grades = _grades(con)
    ranges = by_role(
        "SELECT r, device, precision, env, has_reproduced FROM scored "
        "WHERE n > 0 AND kind = 'baseline' ORDER BY r",
        "device precision env has_reproduced",
    )
    p = Params()
    failures = by_role(_failures_sql(p), "outcome text documented c", p.values)
    messages, not_counted = _messages(con), _not_counted(con)
    return _VariantRows(
        totals,
        per_slice,
        ranges,
        failures,
        messages,
        not_counted,
        env_shows,
        grades,
        by_env,
        scope,
        flaky,
    )


def _variant(
    eid: str,
    spec: _Spec,
    rows: _VariantRows,
    slices: tuple[Slice, ...],
    env_rank: Mapping[str, int],
) -> tuple[VariantAggregate, int]:
    role = (eid, *spec.role)
    # counted: scenarios (anywhere's n); counted_runs: their applicable trials, beside runs
    runs, counted, anywhere, counted_runs = rows.totals.get(role, (0, 0, 0, 0))

    def by_env(envs: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(envs), key=env_rank.__getitem__))

    per_slice = {s: [0, 0, 0, 0, 0, 0] for s in slices}
    for d, p, k, n, related, ok, silent, shows in rows.per_slice.get(role, ()):
        per_slice[(d, p)] = [k, n, related, ok, silent, shows]
    ranges = _ranges(rows.ranges.get(role, ()), slices, by_env) if spec.kind == "baseline" else []
    name_key = (eid, spec.name)
    msgs = sorted(
        (
            MessageSeen(
                t,
                msg,
                count,
                tuple(sorted(outcomes, key=_VALUE_RANK.__getitem__)),
                by_env(envs),
                best_grade,
            )
            for t, msg, count, outcomes, envs, best_grade in rows.messages.get(name_key, ())
        ),
        key=lambda m: (-m.count, m.type, m.message),
    )
    ncs = sorted(
        (
            NotCounted(o, reason, count, by_env(envs))
            for o, reason, count, envs in rows.not_counted.get(name_key, ())
        ),
        key=lambda m: (-m.count, m.outcome, m.reason),
    )
    failures = sorted(rows.failures.get(role, ()), key=lambda f: (-f[3], f[0], f[1], f[2]))
    k_all, n_all, related_all, ok_all, silent_all, shows_all = (
        sum(ps[i] for ps in per_slice.values()) for i in range(6)
    )
    graded = dict(rows.grades.get(name_key, ())) if spec.kind == "baseline" else {}
    va = VariantAggregate(
        name=spec.name,
        kind=spec.kind,
        description=spec.description,
        claim_ref=spec.claim_ref,
        claimed_rate=spec.claimed_rate,
        reading=spec.reading,
        metric=METRIC.get(spec.kind, "ok rate"),
        overall=Rate.of(k_all, n_all),
        related=Rate.of(related_all, n_all),
        ok=Rate.of(ok_all, n_all),
        silent=Rate.of(silent_all, n_all),
        fails_as=spec.fails_as,
        claim_kind=spec.meaning.kind,
        measured_kind=spec.measured_kind,
        unmeasured=spec.meaning.unmeasured,
        condition=spec.meaning.condition,
        within=spec.meaning.within,
        failures=tuple(Failure(o, text, c, documented) for o, text, documented, c in failures),
        by_slice=tuple((slice_id(s), Rate.of(*per_slice[s][:2])) for s in slices),
        ranges=tuple(ranges),
        messages=tuple(msgs),
        not_counted=tuple(ncs),
        runs=runs,
        anywhere=Rate.of(anywhere, counted),
        shown=Rate.of(shows_all, n_all) if spec.kind == "baseline" else Rate.of(0, 0),
        grades=tuple((g.value, graded[g.value]) for g in GRADES if graded.get(g.value)),
        # (the engine's rows are tuples already: sorted as they are)
        by_env=tuple(sorted(rows.by_env.get(role, ()), key=lambda e: env_rank[e[0]])),
        env_shows=tuple(sorted(rows.env_shows.get(role, ()), key=lambda e: env_rank[e[0]])),
        scope=frozenset(rows.scope.get(role, ())),
        flaky_envs=frozenset(e for (e,) in rows.flaky.get(role, ())),
    )
    return va, counted_runs


def _with_advice(
    va: VariantAggregate, spec: _Spec, grouped: _Grouped, eid: str, env_rank: Mapping[str, int]
) -> VariantAggregate:
    """``va`` with its requirements and what they changed (version advice); as it is else."""
    key = (eid, spec.name)
    requires = spec.requires or grouped.requires.get(key, ())
    if not requires:
        return va
    changed = change_texts(grouped.changed.get(key, ()), env_rank)
    return dataclasses.replace(va, requires=requires, changed=changed)


def _ranges(
    rows: Iterable[tuple[Any, ...]],
    slices: tuple[Slice, ...],
    by_env: Callable[[Iterable[str]], tuple[str, ...]],
) -> list[ReproRange]:
    """A baseline's first and last reproducing environments, over every slice ("*") and
    in each slice measured; ``rows``: (device, precision, env, reproduced)."""
    measured: dict[Slice, list[str]] = defaultdict(list)
    reproduced: dict[Slice, list[str]] = defaultdict(list)
    for d, p, env, hit in rows:
        measured[(d, p)].append(env)
        if hit:
            reproduced[(d, p)].append(env)
    ranges = [
        _range(
            "*",
            by_env(itertools.chain.from_iterable(measured.values())),
            by_env(itertools.chain.from_iterable(reproduced.values())),
        )
    ]
    for s in slices:
        if s in measured:
            ranges.append(_range(slice_id(s), by_env(measured[s]), by_env(reproduced[s])))
    return ranges


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


def _per_machine(
    con: Any, labels: Mapping[str, Mapping[tuple[str, str], str]]
) -> tuple[dict[str, dict[CellKey, tuple[tuple[str, CellValue], ...]]], dict[str, set[CellKey]]]:
    """The cells measured on more than one machine: each machine's value (machines by
    label), and the cells where the machines disagree: their applicable trials ended in
    different statuses (a machine that could not measure the cell does not disagree)."""
    grouped: dict[tuple[str, CellKey], dict[str, dict[str, int]]] = {}
    p = Params()
    for row in con.execute(
        f"SELECT entry, variant, env, device, precision, machine, machine_id, {_counts(p)} "
        "FROM runs SEMI JOIN (SELECT * FROM cells WHERE several_machines) "
        "USING (entry, variant, env, device, precision) GROUP BY ALL",
        p.values,
    ).fetchall():
        eid, key, machine = row[0], tuple(row[1:5]), (row[5], row[6])
        counts = grouped.setdefault((eid, key), {}).setdefault(labels[eid][machine], {})
        for v, c in zip(_VALUES, row[7:], strict=True):
            counts[v] = counts.get(v, 0) + c
    by_machine: dict[str, dict[CellKey, tuple[tuple[str, CellValue], ...]]] = defaultdict(dict)
    disagree: dict[str, set[CellKey]] = defaultdict(set)
    for (eid, key), per in grouped.items():
        values = tuple((m, cell_value_of(per[m])) for m in sorted(per))
        by_machine[eid][key] = values  # type: ignore[index]
        counted = {v.status for _, v in values if v.status not in _NOT_COUNTED_VALUES}
        if len(counted) > 1:
            disagree[eid].add(key)  # type: ignore[arg-type]
    return by_machine, disagree


def _envs(
    keys: Iterable[tuple[str, str, str, str]],
    cache: dict[tuple[str, str, str, str], EnvInfo],
    orders: dict[frozenset[tuple[str, str, str, str]], tuple[EnvInfo, ...]],
) -> tuple[EnvInfo, ...]:
    """An entry's environments, oldest first; ``cache`` keeps each one's EnvInfo across
    entries, ``orders`` each set of them sorted (entries mostly share one)."""
    wanted = frozenset(keys)
    envs = orders.get(wanted)
    if envs is None:
        infos = []
        for ck in wanted:
            info = cache.get(ck)
            if info is None:
                info = cache[ck] = env_info(
                    ck[0], {"python": ck[1], "torch": ck[2], "lightning": ck[3]}
                )
            infos.append(info)
        envs = orders[wanted] = tuple(sorted(infos, key=lambda e: e.sort_key))
    return envs


def _machines(
    rows: Iterable[tuple[Any, ...]], label: Mapping[tuple[str, str], str]
) -> tuple[Machine, ...]:
    """An entry's machines, by label (``rows`` as _group counted them)."""
    return tuple(
        sorted(
            (
                Machine(label[(m[0], m[1])], *m[1:-3], runs=m[-3], first=m[-2], last=m[-1])
                for m in rows
            ),
            key=lambda m: (m.name, m.machine_id, *(getattr(m, f) for f in Machine.FIELDS)),
        )
    )


@gc_paused()  # a million runs make millions of objects and no cycles
def aggregate_table(
    table: RecordTable, entries: Sequence[Entry] = (), *, ids: Sequence[str] | None = None
) -> list[EntryAggregate]:
    """The aggregates of every entry that has a definition or a record, sorted by id (or
    of the entries ``ids``, in that order: only their records are read)."""
    con = table.con
    _runs(table, entries, ids)
    grouped = _group(con)
    known = {e.id: e for e in entries}
    if ids is None:
        ids = sorted(set(grouped.runs) | set(known))

    specs: dict[str, list[_Spec]] = {}
    roles: set[tuple[str, str, str, int, str]] = set()
    baselines: list[tuple[str, str]] = []
    judged: set[tuple[str, str, str]] = set()
    silent_baselines: list[tuple[str, str, str]] = []
    for eid in ids:
        specs[eid], names = _specs(known.get(eid), grouped.first_kind.get(eid, {}))
        roles.update((eid, *s.role) for s in specs[eid])
        baselines += [(eid, n) for n in names]
        judged.update((eid, s.name, b) for s in specs[eid] for b in s.judged_by)
        entry = known.get(eid)
        silent_baselines += [
            (eid, v.name, "\x00".join(v.fails_as.postconditions))
            for v in (entry.variants if entry is not None else ())
            if v.kind == "baseline" and v.fails_as is not None and v.fails_as.instead
        ]
    rows = _count_variants(con, sorted(roles), baselines, sorted(judged), silent_baselines)

    labels = {
        eid: machine_labels((m[0], m[1]) for m in grouped.machines.get(eid, ())) for eid in ids
    }
    by_machine, disagree = _per_machine(con, labels)

    env_cache: dict[tuple[str, str, str, str], EnvInfo] = {}
    env_orders: dict[frozenset[tuple[str, str, str, str]], tuple[EnvInfo, ...]] = {}
    out: list[EntryAggregate] = []
    for eid in ids:
        entry = known.get(eid)
        envs = _envs(grouped.envs.get(eid, ()), env_cache, env_orders)
        env_rank = {e.id: i for i, e in enumerate(envs)}
        cells = grouped.cells.get(eid, {})
        slices = tuple(sorted({(k[2], k[3]) for k in cells}, key=_slice_key))
        variants: list[VariantAggregate] = []
        seen: set[str] = set()
        n_counted = 0
        for spec in specs[eid]:
            va, counted = _variant(eid, spec, rows, slices, env_rank)
            va = _with_advice(va, spec, grouped, eid, env_rank)
            variants.append(va)
            if spec.name not in seen:  # (a repeated declared name counts its runs once)
                seen.add(spec.name)
                n_counted += counted
        machines = _machines(grouped.machines.get(eid, ()), labels[eid])
        sig = entry.signature if entry is not None else None
        agg = EntryAggregate(
            id=eid,
            title=entry.title if entry is not None else eid,
            signature_type=sig.type if sig else "",
            signature_message=sig.message if sig else "",
            document=str(entry.document) if entry is not None else None,
            envs=envs,
            slices=slices,
            variants=tuple(variants),
            cells=cells,
            trials=Trials.EMPTY,
            machines=machines,
            by_machine=by_machine.get(eid, {}),
            disagree=frozenset(disagree.get(eid, ())),
            n_runs=grouped.runs.get(eid, 0),
            n_counted=n_counted,
            newest=grouped.newest.get(eid, "") or "",
        )
        judged = EntryAggregate(**{**agg.__dict__, "verdicts": _verdicts(entry, agg)})
        out.append(dataclasses.replace(judged, bottom_line=bottom_line(entry, judged)))
    return _with_trials(con, out)


# -- the trials of each cell, for the page's data files -------------------------------------


def _page_order(con: Any, aggs: list[EntryAggregate]) -> None:
    """Tables page_slices, page_variants, page_envs and page_entries: the position of each
    slice, variant row, environment and entry on the pages, which order the trials."""
    rank_e: list[str] = []
    rank_s: list[str] = []
    rank_v: list[tuple[str, str, int]] = []
    rank_env: list[tuple[str, str, int]] = []
    pos_s: list[int] = []
    for a in aggs:
        for i, (d, p) in enumerate(a.slices):
            rank_e.append(a.id)
            rank_s.append(f"{d}\x00{p}")
            pos_s.append(i)
        for i, v in enumerate(a.variants):
            rank_v.append((a.id, v.name, i))
        for i, e in enumerate(a.envs):
            rank_env.append((a.id, e.id, i))
    _unnest_table(
        con,
        "page_slices",
        {"entry": rank_e, "slice": rank_s, "s": pos_s},
        "entry VARCHAR, slice VARCHAR, s BIGINT",
    )
    _unnest_table(
        con,
        "page_variants",
        {
            "entry": [r[0] for r in rank_v],
            "variant": [r[1] for r in rank_v],
            "v": [r[2] for r in rank_v],
        },
        "entry VARCHAR, variant VARCHAR, v BIGINT",
    )
    _unnest_table(
        con,
        "page_envs",
        {
            "entry": [r[0] for r in rank_env],
            "env": [r[1] for r in rank_env],
            "e": [r[2] for r in rank_env],
        },
        "entry VARCHAR, env VARCHAR, e BIGINT",
    )
    _unnest_table(
        con,
        "page_entries",
        {"entry": [a.id for a in aggs], "i": list(range(len(aggs)))},
        "entry VARCHAR, i BIGINT",
    )


def _text_pool(con: Any) -> Texts:
    """Tables exceptions, objects and texts, and the pool of texts the trials point into."""
    # the texts, each once: exceptions (type, message, frame), provenance and versions
    # (as the page words them, from each distinct object), reasons, start times
    con.execute(
        "CREATE OR REPLACE TEMP TABLE exceptions AS SELECT row_number() OVER () AS x, * FROM "
        "(SELECT DISTINCT exc_type, exc_message, exc_frame FROM runs WHERE has_exception)"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE objects AS SELECT row_number() OVER () - 1 AS o, *, "
        "coalesce(json_extract_string(text, '$.host'), '') AS host FROM "
        "(SELECT DISTINCT provenance AS text, true AS is_provenance FROM runs UNION "
        "SELECT DISTINCT versions, false FROM runs)"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE texts AS SELECT row_number() OVER () AS t, text FROM "
        "(SELECT DISTINCT text FROM (SELECT exc_type AS text FROM exceptions UNION ALL "
        "SELECT exc_message FROM exceptions UNION ALL SELECT exc_frame FROM exceptions "
        "UNION ALL SELECT reason FROM runs UNION ALL SELECT started_at FROM runs) "
        "WHERE text <> '')"
    )
    return _texts(
        con.execute("SELECT text FROM texts ORDER BY t").fetchnumpy()["text"],
        con.execute(
            "SELECT coalesce(a.t, 0), coalesce(b.t, 0), coalesce(c.t, 0) FROM exceptions "
            "LEFT JOIN texts a ON a.text = exc_type LEFT JOIN texts b ON b.text = exc_message "
            "LEFT JOIN texts c ON c.text = exc_frame ORDER BY x"
        ).fetchall(),
        con.execute("SELECT o, text, is_provenance FROM objects ORDER BY o").fetchall(),
    )


def _with_trials(con: Any, aggs: list[EntryAggregate]) -> list[EntryAggregate]:
    """Each aggregate with its trials (``Trials``): the runs of its cells in the page's
    order (slice, variant row, environment; in a cell by trial, start, outcome, host,
    duration, then record order), their texts as ids into one shared pool."""
    _page_order(con, aggs)
    pool = _text_pool(con)
    p = Params()
    fetched = con.execute(
        f"SELECT pn.i AS entry, list_position({p(_VALUES)}::VARCHAR[], r.outcome) - 1 AS outcome, "
        "coalesce(x.x, 0) AS x, r.duration_s, po.o AS machine, "
        "vo.o AS versions, coalesce(rt.t, 0) AS reason, coalesce(st.t, 0) AS started, r.trial "
        "FROM runs r JOIN page_entries pn ON pn.entry = r.entry "
        "JOIN page_slices ps ON ps.entry = r.entry AND ps.slice = r.device || chr(0) || r.precision "
        "JOIN page_variants pv ON pv.entry = r.entry AND pv.variant = r.variant "
        "JOIN page_envs pe ON pe.entry = r.entry AND pe.env = r.env "
        "LEFT JOIN exceptions x ON r.has_exception AND x.exc_type = r.exc_type "
        "AND x.exc_message = r.exc_message AND x.exc_frame = r.exc_frame "
        "JOIN objects po ON po.is_provenance AND po.text = r.provenance "
        "JOIN objects vo ON NOT vo.is_provenance AND vo.text = r.versions "
        "LEFT JOIN texts rt ON rt.text = r.reason LEFT JOIN texts st ON st.text = r.started_at "
        "ORDER BY pn.i, ps.s, pv.v, pe.e, r.trial, r.started_at, r.outcome, po.host, "
        "r.duration_s, r.rid",
        p.values,
    ).fetchnumpy()
    outcome = np.asarray(fetched["outcome"], dtype=np.int64)
    # where each entry's trials start and end (entries in order, their trials together)
    bounds = np.searchsorted(
        np.asarray(fetched["entry"], dtype=np.int64), np.arange(len(aggs) + 1), side="left"
    ).tolist()
    out = []
    for i, a in enumerate(aggs):
        lo, hi = bounds[i], bounds[i + 1]
        trials = Trials(
            pool,
            outcome[lo:hi],
            np.asarray(fetched["x"][lo:hi], dtype=np.int64),
            np.asarray(fetched["duration_s"][lo:hi], dtype=np.float64),
            np.asarray(fetched["machine"][lo:hi], dtype=np.int64),
            np.asarray(fetched["versions"][lo:hi], dtype=np.int64),
            np.asarray(fetched["reason"][lo:hi], dtype=np.int64),
            np.asarray(fetched["started"][lo:hi], dtype=np.int64),
            np.asarray(fetched["trial"][lo:hi], dtype=np.int64),
        )
        out.append(EntryAggregate(**{**a.__dict__, "trials": trials}))
    return out


def _texts(
    texts: np.ndarray, exceptions: list[tuple[int, int, int]], objects: list[tuple[int, str, bool]]
) -> Texts:
    return Texts(
        ["", *texts.tolist()],
        np.array([(0, 0, 0), *exceptions], dtype=np.int64).reshape(-1, 3),
        [(json.loads(text), is_provenance) for _, text, is_provenance in objects],
    )
