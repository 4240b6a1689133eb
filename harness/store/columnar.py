"""The record store read by a columnar engine (DuckDB): what ``latest(Store.load())`` gives,
as a table (``RecordTable``), without one Python object per line. The report aggregates
that table in the engine too (harness/aggregate/cells.py).

DuckDB reads every line of every record file and parses it as JSON. A SQL predicate
(``_accept``) takes a line as it is only when it proves the line valid and in no need of
sanitising under harness/store/validate.py's rules: a *sufficient* condition, stricter than the
rules (identifiers of printable ASCII, the current schema or schema 4 without the two fields
5 added, whose migration only adds their defaults, no character or escape that R12
would replace, no text over its cap, no duplicate key, time stamps in UTC in the format the
runner writes, no JSON that DuckDB's parser forgives and Python's refuses, such as a
trailing comma). Every other line goes through the store's own reader (``store.read_line``),
which accepts, migrates, sanitises or refuses it exactly as ``Store.load`` does, with the
same file:line warnings (a line that is not UTF-8 included).

The newest record per key and machine (``store.latest``) is picked in the engine as well.
Where the engine cannot decide alone (two records of one key and machine that started at
the same time, or a key that has a record read by Python) ``store.latest`` decides over the
records of that key, in the store's order: those Python read, and the engine's made into
Records from their columns (exactly what Python reads: the validator makes every duration
a float, as the engine's columns hold it).

Given a snapshot folder (``report`` passes results/.cache/snapshot), a record file whose
snapshot holds (harness/store/snapshot.py: the file still starts with the bytes it covers) is
read from it: its accepted rows from Parquet, its other lines read by Python again, and
only the lines after it go through the engine, numbered on from it. The snapshots are
then renewed to cover what was read (not with ``update=False``: ``report --check``).
The newest records are picked on the narrow columns first and the wide ones (tracebacks,
tails) joined once.

tests/store/test_columnar.py checks the equivalence on generated stores: mixtures of valid,
hostile, truncated, old-schema and odd lines across several files, and, with snapshots,
across appends (by the store's writer, with its append notes, and by other programs),
lines completed later, edits in place, truncations, removed files and damaged snapshot
files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from harness.domain import DEVICES, KINDS, PRECISIONS
from harness.outcomes import Outcome
from harness.store import appends, snapshot
from harness.store.jsonl import (
    MAX_LINE_BYTES,
    LoadResult,
    NotARecordFile,
    Refused,
    Store,
    being_written,
    has_long_line,
    latest,
    open_record_file,
    parse_fd,
    read_line,
)
from harness.store.records import SCHEMA, ExceptionInfo, Record
from harness.store.snapshot import Snapshot
from harness.store.sql import Params, path_literal
from harness.store.validate import (
    MAX_DURATION_S,
    MAX_ID,
    MAX_ITEMS,
    MAX_TAIL,
    MAX_TEXT,
    MAX_TRIAL,
    MAX_VALUE,
)

__all__ = ["RecordTable", "load_latest"]

FIELDS = tuple(f.name for f in dataclasses.fields(Record))
_EXCEPTION_KEYS = ("type", "message", "frame", "traceback")
# what the engine extracts from each line in one parse: every field, and the exception's
# (a value comes as its JSON text, written by DuckDB's JSON writer: minified)
PATHS = (*FIELDS, *(f"exception.{k}" for k in _EXCEPTION_KEYS))
_INDEX = {name: i + 1 for i, name in enumerate(PATHS)}  # SQL lists count from 1
_IDENT = ("entry", "variant", "cell", "trial", "machine", "machine_id")
_LINES = 1 << 40  # (file, line) as one number: file * _LINES + line

# A line the engine may take as it is: one JSON object, alone on its line, with no DEL
# or C1 control character or U+FFFD (R12 would replace the first two; the last may stand
# for bytes that were not UTF-8: see _read_texts) and no escape of a control character or
# surrogate (\u0001, \ud800, and the short \b, \f and \r: R12 keeps only tab and
# newline; an escaped backslash before b, f or r goes to Python too); no comma before a
# closing bracket (DuckDB's parser allows a trailing comma, Python's does not). Raw C0 controls need no test: in a string they make the line
# invalid JSON for both parsers, between tokens both skip tab and CR alike. Lines with
# any of these may well be valid: Python decides.
_NON_ASCII_SUSPECT = r"[\x{80}-\x{9f}\x{fffd}]"
_SUSPECT_ESCAPE = r"(?i)\\u(00[01][0-9a-f]|007f|00[89][0-9a-f]|d[89a-f][0-9a-f][0-9a-f])"
_TRAILING_COMMA = r",[ \t\r]*[\]}]"
# a JSON string whose text needs no decoding (no quote or backslash inside) and whose
# value is an identifier the engine takes: printable ASCII without space (R2 allows more)
_ID = r'"[!#-\[\]-~]{1,' + str(MAX_ID) + '}"'
_PLAIN = r'"[^"\\]*"'  # a JSON string with nothing escaped: its text is its value, quoted
# started_at as the runner writes it, in UTC (R7 allows more: Python decides)
_STAMP = (
    r'"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
    r'T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{3}|\.[0-9]{6})?\+00:00"'
)
_INTEGER = r"-?[0-9]{1,19}"
_NUMBER = r"-?[0-9][0-9.eE+-]*"
# versions and provenance: string -> string, nothing escaped (R10 allows more)
_PAIR = _ID + ":" + _PLAIN
_MAP = r"\{\}|\{" + _PAIR + "(," + _PAIR + r")*\}"
# checks: name -> {ok, detail}, "_warnings" -> [strings] (R9 allows more)
_OK = '"ok":(true|false)'
# a JSON string whose escapes stand for characters R12 keeps (newline, tab, quote,
# backslash, slash): warnings and details quote tracebacks and messages of several lines
_KEPT = r'"([^"\\]|\\[nt"\\/])*"'
_DETAIL = '"detail":' + _KEPT
_CHECK = _ID + r":\{" + _OK + "(," + _DETAIL + r")?\}|" + _ID + r":\{" + _DETAIL + "," + _OK + r"\}"
_WARNINGS = r'"_warnings":\[(' + _KEPT + "(," + _KEPT + r")*)?\]"
_MEMBER = "(" + _CHECK + "|" + _WARNINGS + ")"
_CHECKS = r"\{\}|\{" + _MEMBER + "(," + _MEMBER + r")*\}"
_TEXT_CAP = {
    "reason": MAX_TEXT,
    "stdout_tail": MAX_TAIL,
    "stderr_tail": MAX_TAIL,
    # R11: other str fields, capped at MAX_TEXT
    "machine": MAX_TEXT,
    "machine_id": MAX_TEXT,
    "imported_from": MAX_TEXT,
    "ran_in": MAX_TEXT,
}
_CLOSED = {
    "kind": KINDS,
    "device": DEVICES,
    "precision": PRECISIONS,
    "outcome": tuple(o.value for o in Outcome),
    "isolation": ("fork", "process"),
}
_REQUIRED = ("entry", "variant", "kind", "cell", "env", "device", "precision", "trial", "outcome")


def _v(name: str) -> str:
    return f"v{_INDEX[name]}"


def _t(name: str) -> str:
    """The value's JSON text (SQL NULL where the key is absent)."""
    return f"({_v(name)}::VARCHAR)"


def _match(name: str, pattern: str, p: Params) -> str:
    return f"regexp_full_match({_t(name)}, {p(pattern)})"


def _absent(name: str) -> str:
    return f"{_v(name)} IS NULL"


def _null(name: str) -> str:
    return f"({_absent(name)} OR {_t(name)} = 'null')"


def _text_ok(name: str, cap: int) -> str:
    # a string of at most ``cap`` characters: its JSON text is never shorter than its value
    # (in UTF-8 bytes, which are never fewer than its characters) plus the two quotes
    return f"(starts_with({_t(name)}, '\"') AND strlen({_t(name)}) <= {cap + 2})"


def _integer_ok(name: str, low: int, high: int, p: Params) -> str:
    return (
        f"({_match(name, _INTEGER, p)} AND TRY_CAST({_t(name)} AS BIGINT) BETWEEN {low} AND {high})"
    )


def _number_ok(name: str, p: Params) -> str:
    n = f"TRY_CAST({_t(name)} AS DOUBLE)"
    return (
        f"({_match(name, _NUMBER, p)} AND isfinite({n}) AND {n} BETWEEN 0 AND {MAX_DURATION_S!r})"
    )


def _distinct_keys(name: str, most: int) -> str:
    keys = f"json_keys({_v(name)})"
    return f"(len({keys}) <= {most} AND len({keys}) = len(list_distinct({keys})))"


def _exception_ok() -> str:
    """null, or an object of type, message, frame (strings; type not empty) and, perhaps,
    traceback: the object's text is exactly as long as those members written out, so it
    holds no other key and no key twice."""
    x = _t("exception")
    parts = [f"starts_with({x}, '{{')", "strlen(" + _t("exception.type") + ") > 2"]
    members = []
    for key in _EXCEPTION_KEYS:
        sub = f"exception.{key}"
        text_ok = _text_ok(sub, MAX_TEXT)
        parts.append(text_ok if key != "traceback" else f"({_absent(sub)} OR {text_ok})")
        members.append(f"coalesce(strlen({_t(sub)}) + {len(key) + 3}, 0)")
    present = " + ".join(f"({_v('exception.' + k)} IS NOT NULL)::INTEGER" for k in _EXCEPTION_KEYS)
    parts.append(f"strlen({x}) = 2 + {' + '.join(members)} + ({present}) - 1")
    return f"({_null('exception')} OR ({' AND '.join(parts)}))"


def _accept(p: Params) -> str:
    """The SQL condition under which a parsed line (``keys``: its keys; ``v1``, ``v2``, ...:
    its values' JSON texts, in PATHS order) is a record that validate_record accepts
    unchanged (its patterns and closed values parameters of the statement, in ``p``)."""
    rules: dict[str, str] = {
        # schema 4 lines too: their migration to 5 only adds ran_in and requires, as their
        # defaults (a line of 4 that has either goes to Python)
        "schema": (
            f"({_t('schema')} = {p(str(SCHEMA))} OR ({_t('schema')} = {p('4')} "
            f"AND {_absent('ran_in')} AND {_absent('requires')}))"
        ),
        "trial": _integer_ok("trial", 0, MAX_TRIAL, p),
        "duration_s": f"({_absent('duration_s')} OR {_number_ok('duration_s', p)})",
        "run_s": f"({_null('run_s')} OR {_number_ok('run_s', p)})",
        "exit_code": f"({_null('exit_code')} OR {_integer_ok('exit_code', -(2**31), 2**32 - 1, p)})",
        "signal": f"({_null('signal')} OR {_integer_ok('signal', 1, 255, p)})",
        "started_at": (
            f"({_absent('started_at')} OR {_t('started_at')} = '\"\"' OR "
            f"({_match('started_at', _STAMP, p)} AND "
            f"TRY_CAST(substr({_t('started_at')}, 2, 10) AS DATE) IS NOT NULL))"
        ),
        "exception": _exception_ok(),
        "checks": (
            f"({_absent('checks')} OR ({_match('checks', _CHECKS, p)} "
            f"AND strlen({_t('checks')}) <= {MAX_TEXT} "
            f"AND NOT contains({_t('checks')}, '\"_warnings\":{{') "
            f"AND {_distinct_keys('checks', MAX_ITEMS)} "
            f"AND coalesce(json_array_length({_v('checks')}, '$._warnings'), 0) <= {MAX_ITEMS}))"
        ),
    }
    for name in ("versions", "provenance", "requires"):
        rules[name] = (
            f"({_absent(name)} OR ({_match(name, _MAP, p)} AND strlen({_t(name)}) <= {MAX_VALUE} "
            f"AND {_distinct_keys(name, MAX_ITEMS)}))"
        )
    for name in ("entry", "variant", "cell", "env"):
        rules[name] = _match(name, _ID, p)
    for name, allowed in _CLOSED.items():
        present = f"{_t(name)} IN ({', '.join(p(chr(34) + a + chr(34)) for a in allowed)})"
        rules[name] = present if name in _REQUIRED else f"({_absent(name)} OR {present})"
    for name, cap in _TEXT_CAP.items():
        rules[name] = f"({_absent(name)} OR {_text_ok(name, cap)})"
    missing = set(FIELDS) - set(rules)
    if missing:  # a Record field the engine has no rule for: every line would pass it unchecked
        raise TypeError(
            f"harness/store/columnar.py has no rule for Record field(s) {sorted(missing)}"
        )
    # every key a field and none twice: as many keys as fields found (the required ones
    # are found: their rules above need them)
    keys = "len(keys) = " + " + ".join(f"({_v(n)} IS NOT NULL)::INTEGER" for n in FIELDS)
    return " AND ".join([keys, *(f"coalesce({rules[n]}, false)" for n in FIELDS)])


def _string(name: str) -> str:
    """A string value: its text without the quotes where nothing in it is escaped."""
    t = _t(name)
    # (nothing escaped: no quote inside either, so trimming quotes takes just the two)
    return f"CASE WHEN contains({t}, '\\') THEN {_v(name)} ->> '$' ELSE trim({t}, '\"') END"


def _columns() -> str:
    """The typed values of an accepted line, as Record's fields (defaults where absent)."""
    cols = {name: _string(name) for name in ("entry", "variant", "kind", "cell", "env", "device")}
    cols.update(
        precision=_string("precision"),
        trial=f"CAST({_t('trial')} AS BIGINT)",
        outcome=_string("outcome"),
        reason=f"coalesce({_string('reason')}, '')",
        has_exception=f"coalesce(starts_with({_t('exception')}, '{{'), false)",
        **{f"exc_{k}": f"coalesce({_string('exception.' + k)}, '')" for k in _EXCEPTION_KEYS},
        checks=f"coalesce({_t('checks')}, '{{}}')",
        duration_s=f"coalesce(TRY_CAST({_t('duration_s')} AS DOUBLE), 0.0)",
        exit_code=f"TRY_CAST({_t('exit_code')} AS BIGINT)",
        signal=f"TRY_CAST({_t('signal')} AS BIGINT)",
        stdout_tail=f"coalesce({_string('stdout_tail')}, '')",
        stderr_tail=f"coalesce({_string('stderr_tail')}, '')",
        versions=f"coalesce({_t('versions')}, '{{}}')",
        provenance=f"coalesce({_t('provenance')}, '{{}}')",
        started_at=f"coalesce({_string('started_at')}, '')",
        machine=f"coalesce({_string('machine')}, '')",
        machine_id=f"coalesce({_string('machine_id')}, '')",
        imported_from=f"coalesce({_string('imported_from')}, '')",
        isolation=f"coalesce({_string('isolation')}, 'process')",
        run_s=f"TRY_CAST({_t('run_s')} AS DOUBLE)",
        ran_in=f"coalesce({_string('ran_in')}, '')",
        requires=f"coalesce({_t('requires')}, '{{}}')",
    )
    return ", ".join(f"{expr} AS {name}" for name, expr in cols.items())


_RECORD_COLUMNS = (
    "entry, variant, kind, cell, env, device, precision, trial, outcome, reason, "
    "has_exception, exc_type, exc_message, exc_frame, exc_traceback, checks, duration_s, "
    "exit_code, signal, stdout_tail, stderr_tail, versions, provenance, started_at, machine, "
    "machine_id, imported_from, isolation, run_s, ran_in, requires"
)


def _record(row: tuple[Any, ...]) -> Record:
    """The Record of a row of _RECORD_COLUMNS. Its maps are read by orjson (a fourth of
    json.loads's time): their texts are DuckDB's of an accepted line or json.dumps of a
    validated Record, objects of strings and booleans only (R9, R10), with no NaN, no
    integer beyond 64 bits and no lone surrogate, where the two parsers could differ."""
    (
        entry,
        variant,
        kind,
        cell,
        env,
        device,
        precision,
        trial,
        outcome,
        reason,
        has_exception,
        exc_type,
        exc_message,
        exc_frame,
        exc_traceback,
        checks,
        duration_s,
        exit_code,
        signal,
        stdout_tail,
        stderr_tail,
        versions,
        provenance,
        started_at,
        machine,
        machine_id,
        imported_from,
        isolation,
        run_s,
        ran_in,
        requires,
    ) = row
    return Record(
        entry=entry,
        variant=variant,
        kind=kind,
        cell=cell,
        env=env,
        device=device,
        precision=precision,
        trial=trial,
        outcome=Outcome(outcome),
        reason=reason,
        exception=(
            ExceptionInfo(exc_type, exc_message, exc_frame, exc_traceback)
            if has_exception
            else None
        ),
        checks=orjson.loads(checks),
        duration_s=duration_s,
        exit_code=exit_code,
        signal=signal,
        stdout_tail=stdout_tail,
        stderr_tail=stderr_tail,
        versions=orjson.loads(versions),
        provenance=orjson.loads(provenance),
        started_at=started_at,
        machine=machine,
        machine_id=machine_id,
        imported_from=imported_from,
        isolation=isolation,
        run_s=run_s,
        ran_in=ran_in,
        requires=orjson.loads(requires),
    )


def _order(r: Record) -> tuple[Any, ...]:
    return (r.entry, r.variant, r.cell, r.trial, r.machine, r.machine_id)


_SCHEMA = (
    "rid BIGINT, entry VARCHAR, variant VARCHAR, kind VARCHAR, cell VARCHAR, env VARCHAR, "
    "device VARCHAR, precision VARCHAR, trial BIGINT, outcome VARCHAR, reason VARCHAR, "
    "has_exception BOOLEAN, exc_type VARCHAR, exc_message VARCHAR, exc_frame VARCHAR, "
    "exc_traceback VARCHAR, checks VARCHAR, duration_s DOUBLE, exit_code BIGINT, "
    "signal BIGINT, stdout_tail VARCHAR, stderr_tail VARCHAR, versions VARCHAR, "
    "provenance VARCHAR, started_at VARCHAR, machine VARCHAR, machine_id VARCHAR, "
    "imported_from VARCHAR, isolation VARCHAR, run_s DOUBLE, ran_in VARCHAR, requires VARCHAR"
)


def _row(r: Record) -> tuple[Any, ...]:
    exc = r.exception
    return (
        r.entry,
        r.variant,
        r.kind,
        r.cell,
        r.env,
        r.device,
        r.precision,
        r.trial,
        r.outcome.value,
        r.reason,
        exc is not None,
        exc.type if exc else "",
        exc.message if exc else "",
        exc.frame if exc else "",
        exc.traceback if exc else "",
        json.dumps(r.checks),
        float(r.duration_s),
        r.exit_code,
        r.signal,
        r.stdout_tail,
        r.stderr_tail,
        json.dumps(r.versions),
        json.dumps(r.provenance),
        r.started_at,
        r.machine,
        r.machine_id,
        r.imported_from,
        r.isolation,
        None if r.run_s is None else float(r.run_s),
        r.ran_in,
        json.dumps(r.requires),
    )


def _insert(
    con: duckdb.DuckDBPyConnection,
    records: Sequence[Record],
    first_rid: int | None,
    table: str = "records",
) -> None:
    """``records`` into ``table`` (rid: their order from ``first_rid``, or NULL)."""
    if not records:
        return
    columns = [list(c) for c in zip(*map(_row, records), strict=True)]
    rids = list(range(first_rid, first_rid + len(records))) if first_rid is not None else None
    con.execute(
        f"INSERT INTO {table} SELECT unnest(?)" + ", unnest(?)" * len(columns),
        [rids if rids is not None else [None] * len(records), *columns],
    )


def _connect() -> duckdb.DuckDBPyConnection:
    """A connection of the engine's own: no progress bar (DuckDB draws one on stdout for
    a long statement, into the report's own output and CI logs)."""
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    return con


@dataclass
class RecordTable:
    """Records held by the engine: table ``records`` of ``con``, Record's fields as columns
    (the exception in four, checks, versions and provenance as JSON text), and ``rid``,
    the records' order (for the store's newest records: by key, then machine, as
    ``store.latest`` sorts them)."""

    con: duckdb.DuckDBPyConnection
    warnings: list[str] = field(default_factory=list)  # the lines kept out, file:line
    refused: list[Refused] = field(default_factory=list)
    python_lines: int = 0  # lines of the store read by Python rather than by the engine
    snapshot_lines: int = 0  # lines of the store taken from snapshots (harness/store/snapshot.py)
    # None: the table holds every entry's records. Else a load ``since`` a basis (see
    # load_latest): the entries with a line appended since, whose records alone it holds;
    # every other entry's records are those of the basis
    touched: frozenset[str] | None = None
    # per record file, the (bytes, sha256) of its snapshot where that now covers the whole
    # file as read (a basis for the next load); empty where any file is not so covered
    covered: dict[str, tuple[int, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Record]) -> RecordTable:
        """A table of ``records``, in their order (tests, and reports of records in hand)."""
        con = _connect()
        con.execute(f"CREATE TABLE records ({_SCHEMA})")
        _insert(con, list(records), 0)
        return cls(con)

    def __len__(self) -> int:
        row = self.con.execute("SELECT count(*) FROM records").fetchone()
        return row[0] if row else 0

    def records(self, entries: Sequence[str] | None = None) -> list[Record]:
        """Every record (or those of ``entries``), as Records, in order."""
        where = "" if entries is None else " WHERE entry IN (SELECT unnest(?))"
        rows = self.con.execute(
            f"SELECT {_RECORD_COLUMNS} FROM records{where} ORDER BY rid",
            [] if entries is None else [list(entries)],
        ).fetchall()
        return [_record(row) for row in rows]


_TYPED = tuple(tuple(c.split(" ")) for c in _SCHEMA.split(", ")[1:])  # (name, type), rid aside
# the accepted lines (a snapshot's Parquet file of them): line number and columns
_GOOD = ("n", "BIGINT"), *_TYPED
_GOOD_COLUMNS = ", ".join(name for name, _ in _GOOD)


def _read_texts(
    con: duckdb.DuckDBPyConnection, sources: Sequence[tuple[int, Path, int]], scratch: Path
) -> dict[int, bytes]:
    """Every line of each source (file index, path, lines before it) into table ``lines``
    (file, n, line), numbered after the lines before it. DuckDB reads UTF-8 text only: a
    file that is not is read from a copy with each invalid byte sequence replaced by U+FFFD
    (a line holding one goes to Python, see ``_NON_ASCII_SUSPECT``); returns the bytes of
    those files, whose lines Python reads as they are."""
    insert = (
        "INSERT INTO lines SELECT ?, ? + generate_subscripts(pieces, 1), unnest(pieces) "
        "FROM (SELECT string_split(content, chr(10)) AS pieces FROM read_text(?))"
    )
    raw: dict[int, bytes] = {}
    for i, path, before in sources:
        try:
            con.execute(insert, [i, before, str(path)])
        except duckdb.Error:
            raw[i] = path.read_bytes()
            # a newline is never part of an invalid sequence: the lines stay where they are
            copy = scratch / f"{i}.utf8.jsonl"
            copy.write_text(raw[i].decode("utf-8", "replace"), encoding="utf-8")
            con.execute(insert, [i, before, str(copy)])
    return raw


class _Stale(Exception):
    """Snapshots that turned out not to match their record files (by name)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = names


@dataclass
class _Source:
    """A record file as one load reads it: from its snapshot, if one holds, then the
    lines after it (``tail``), else in full."""

    index: int
    path: Path
    fd: int
    before: os.stat_result
    snap: Snapshot | None = None
    first: int = 0  # lines the snapshot covers: the engine reads the lines after them
    tail: bytes = b""  # the bytes after the snapshot
    prefix: Future[Any] | None = None  # BlockDigest of the bytes the snapshot covers, hashed now
    whole: Future[Any] | None = None  # digest_lines of a file read in full
    # the non-blank lines the engine did not accept, (n, bytes): the snapshot's, then the rest
    others: list[tuple[int, bytes]] = field(default_factory=list)
    # a line longer than MAX_LINE_BYTES: the whole file is read by Python, in chunks (the
    # engine would hold the line whole, and read_text the file whole)
    python_only: bool = False


def _open_snapshot(con: duckdb.DuckDBPyConnection, cache: Path, src: _Source) -> None:
    """Use the snapshot of ``src`` if its files hold and the record file is not shorter than
    what it covers; the record file's first bytes are hashed in the background (checked
    before the load returns)."""
    snap = snapshot.open_snapshot(cache, src.path.name)
    if snap is None or src.before.st_size < snap.bytes:
        return
    if has_long_line(src.fd, snap.bytes, src.before.st_size):
        src.python_only = True
        return
    files = snapshot.good_parquet(cache, snap)
    try:
        described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [files]).fetchall()
        if [(row[0], row[1]) for row in described] != list(_GOOD):
            return
        for seg, file in zip(snap.segments, files, strict=True):
            count, low, high = con.execute(
                "SELECT count(*), min(n), max(n) FROM read_parquet(?)", [file]
            ).fetchone() or (None, None, None)
            if count != seg.good_rows or (
                count and not (seg.first < low and high <= seg.first + seg.lines)
            ):
                return
        others = snapshot.other_lines(con, cache, snap)
    except (duckdb.Error, ValueError):
        return
    src.snap, src.first, src.others = snap, snap.lines, others
    src.tail = os.pread(src.fd, src.before.st_size - snap.bytes, snap.bytes)


def load_latest(
    store: Store,
    cache: Path | None = None,
    *,
    update: bool = True,
    since: Mapping[str, tuple[int, str]] | None = None,
) -> RecordTable:
    """``latest(store.load().records)`` with ``store.load()``'s warnings and refused lines,
    read by the engine (see the module's docstring). ``cache``: the snapshots' folder
    (harness/store/snapshot.py; None: no snapshot is read or written); ``update``: write the
    snapshots of what was read (False: write nothing, as ``report --check``). A cache
    folder that is a link is refused (snapshot.refusal): named first in the warnings, and
    the load reads every file in full.

    ``since``: a basis, the ``covered`` of an earlier load. Where the record files are
    exactly those, each still starting with the bytes its snapshot covered then (hashed, or
    vouched for by the store's append note: appends.py), only lines were appended since:
    the table then holds the records of the entries those lines name (``touched``), every
    other entry's being what they were.
    Anything else (a file added, removed, edited, a snapshot gone) is a full load."""
    refused = snapshot.refusal(cache) if cache is not None else None
    if refused is not None:
        table = load_latest(store, None, update=update)
        table.warnings.insert(0, f"{refused}; the snapshots are neither read nor written")
        return table
    skip: set[str] = set()
    while True:
        try:
            return _load(store, cache, update, skip, since if not skip else None)
        except _Stale as exc:  # read those files in full
            skip |= exc.names
        except duckdb.Error:
            # a snapshot's file that went away or would not read: once more, without any
            names = {p.name for p in store.files()}
            if cache is None or names <= skip:
                raise
            skip |= names


def _load(
    store: Store,
    cache: Path | None,
    update: bool,
    skip: set[str],
    since: Mapping[str, tuple[int, str]] | None,
) -> RecordTable:
    files, skipped = store.scan()
    con = _connect()
    sources: list[_Source] = []
    try:
        with ThreadPoolExecutor(max_workers=1) as hashing:
            for path in files:
                try:
                    fd = open_record_file(path)
                except NotARecordFile as exc:  # swapped since the listing
                    skipped.append(str(exc))
                    continue
                except FileNotFoundError:
                    continue
                src = _Source(len(sources), path, fd, os.fstat(fd))
                sources.append(src)
                if cache is not None and path.name not in skip:
                    _open_snapshot(con, cache, src)
                if src.snap is None and not src.python_only:
                    src.python_only = has_long_line(fd, 0, src.before.st_size)
                if src.snap is not None:
                    src.prefix = _prefix(hashing, cache, src)
                elif cache is not None and update and not src.python_only:
                    src.whole = hashing.submit(snapshot.digest_lines, fd)
            appended = since is not None and _only_appended(sources, since, skipped)
            table = _load_sources(con, sources, cache, appended)
            table.warnings[:0] = skipped
            if cache is not None and update:
                table.covered = _save_snapshots(con, cache, sources)
                snapshot.clean(cache, [p.name for p in files])
            con.execute("DROP VIEW good" if table.touched is None else "DROP TABLE good")
            con.execute("DROP VIEW good_all")
            for name in ("good_lines", "lines"):
                con.execute(f"DROP TABLE {name}")
            return table
    finally:
        for src in sources:
            os.close(src.fd)


def _prefix(hashing: ThreadPoolExecutor, cache: Path | None, src: _Source) -> Future[Any]:
    """The BlockDigest of the bytes ``src``'s snapshot covers: from the snapshot's block
    digests where the file is the one it read or only the store appended to it since
    (appends.py), else hashed from the file (in the background)."""
    assert src.snap is not None
    if cache is not None and appends.only_appended(cache, src.path.name, src.snap.file, src.before):
        resumed = snapshot.resume(src.fd, src.snap)
        if resumed is not None:
            done: Future[Any] = Future()
            done.set_result(resumed)
            return done
    return hashing.submit(snapshot.digest_prefix, src.fd, src.snap.bytes)


def _only_appended(
    sources: Sequence[_Source], since: Mapping[str, tuple[int, str]], skipped: Sequence[str]
) -> bool:
    """Whether the record files are those of ``since`` and each has the snapshot it covered
    whole then (its first bytes are hashed against it before the load returns)."""
    if skipped or {s.path.name for s in sources} != set(since):
        return False
    # a file that was empty has no snapshot: every line of it is new
    return all(
        ((s.snap.bytes, s.snap.sha256) if s.snap is not None else _EMPTY) == since[s.path.name]
        for s in sources
    )


_EMPTY = (0, snapshot.digest_bytes(b""))  # what covers an empty file


def _by_descriptor(s: _Source) -> Path:
    """The path the engine reads ``s`` by: its open descriptor where /proc has it (what was
    checked to be a regular file, whatever the name points to now), else its name."""
    fd_path = Path(f"/proc/self/fd/{s.fd}")
    return fd_path if fd_path.exists() else s.path


def _result(future: Future[Any] | None) -> Any:
    return None if future is None else future.result()


def _load_sources(
    con: duckdb.DuckDBPyConnection,
    sources: Sequence[_Source],
    cache: Path | None,
    appended: bool = False,
) -> RecordTable:
    """The records of ``sources``: the lines DuckDB accepts (and the snapshots'), the rest
    read by Python, then the newest per key and machine as store.latest chooses it.
    ``appended``: only lines after the snapshots are new (see load_latest's ``since``): the
    records of the entries they name."""
    raw = _accept_lines(con, sources, cache)
    result, read_by_python, python_lines = _read_the_rest(con, sources, raw)
    touched: frozenset[str] | None = None
    if appended:
        firsts = {s.index: s.first for s in sources}
        touched = frozenset(
            {row[0] for row in con.execute("SELECT DISTINCT entry FROM good_lines").fetchall()}
            | {r.entry for i, n, r in read_by_python if n > firsts[i]}
        )
        con.execute(
            "CREATE TEMP TABLE touched AS SELECT unnest(?::VARCHAR[]) AS entry", [sorted(touched)]
        )
        # the touched entries' rows, read once from the snapshots (the newest records
        # are chosen over them in three statements)
        con.execute("DROP VIEW good")
        con.execute(
            "CREATE TEMP TABLE good AS SELECT * FROM good_all "
            "WHERE entry IN (SELECT entry FROM touched)"
        )
        read_by_python = [item for item in read_by_python if item[2].entry in touched]
    _find_undecided(con, read_by_python)
    # the snapshots' record files still start with the bytes they cover (hashed meanwhile),
    # before any line of them is read again by number
    stale = {
        s.path.name
        for s in sources
        if s.snap is not None and not ((h := _result(s.prefix)) and h.hexdigest() == s.snap.sha256)
    }
    if stale:
        raise _Stale(stale)
    _choose_records(con, read_by_python)
    if touched is not None:
        con.execute("DROP TABLE touched")
    return RecordTable(
        con,
        result.warnings,
        result.refused,
        python_lines,
        sum(s.first for s in sources),
        touched,
    )


def _accept_lines(
    con: duckdb.DuckDBPyConnection, sources: Sequence[_Source], cache: Path | None
) -> dict[int, bytes]:
    """Table ``lines`` (every line read now), ``good_lines`` (those parsed, checked and
    typed in one pass) and view ``good`` (those and the snapshots'). Returns the raw bytes
    of the files that ``_read_texts`` read (by file index)."""
    con.execute("CREATE TEMP TABLE lines (file INTEGER, n BIGINT, line VARCHAR)")
    with tempfile.TemporaryDirectory(prefix="harness-columnar-") as scratch:
        texts = []
        for s in sources:
            if s.python_only:
                continue
            if s.snap is None:
                texts.append((s.index, _by_descriptor(s), 0))
            else:
                tail = Path(scratch) / f"{s.index}.tail.jsonl"
                tail.write_bytes(s.tail)
                texts.append((s.index, tail, s.first))
        raw = _read_texts(con, texts, Path(scratch))
    # parsed, checked and typed in one pass (nothing but the accepted rows is kept)
    values = ", ".join(f"v[{i}] AS v{i}" for i in _INDEX.values())
    con.execute(
        "CREATE TEMP TABLE good_lines (file INTEGER, " + ", ".join(" ".join(c) for c in _GOOD) + ")"
    )
    p = Params()
    con.execute(
        f"INSERT INTO good_lines BY NAME SELECT file, n, {_columns()} FROM (SELECT file, n, "
        f"keys, {values} FROM (SELECT file, n, json_keys(line) AS keys, "
        f"json_extract(line, {p(['$.' + f for f in PATHS])}::VARCHAR[]) AS v FROM lines "
        f"WHERE strlen(line) <= {MAX_LINE_BYTES} AND starts_with(line, '{{') "
        "AND ends_with(line, '}') AND NOT contains(line, chr(127)) "
        f"AND (strlen(line) = length(line) OR NOT regexp_matches(line, {p(_NON_ASCII_SUSPECT)})) "
        f"AND NOT (contains(line, '\\u') AND regexp_matches(line, {p(_SUSPECT_ESCAPE)})) "
        "AND NOT (contains(line, '\\b') OR contains(line, '\\f') OR contains(line, '\\r')) "
        f"AND NOT regexp_matches(line, {p(_TRAILING_COMMA)}) AND json_valid(line))) "
        f"WHERE {_accept(p)}",
        p.values,
    )
    # the accepted lines: those of the snapshots and those read now
    columns = _GOOD_COLUMNS
    parts = [f"SELECT file, {columns} FROM good_lines"]
    for s in sources:
        if cache is not None and s.snap is not None:
            # a view takes no parameter: the paths are written into it
            parquet = path_literal(snapshot.good_parquet(cache, s.snap))
            parts.append(f"SELECT {s.index} AS file, {columns} FROM read_parquet({parquet})")
    con.execute("CREATE TEMP VIEW good_all AS " + " UNION ALL ".join(parts))
    con.execute("CREATE TEMP VIEW good AS SELECT * FROM good_all")
    return raw


def _read_the_rest(
    con: duckdb.DuckDBPyConnection, sources: Sequence[_Source], raw: dict[int, bytes]
) -> tuple[LoadResult, list[tuple[int, int, Record]], int]:
    """Every line DuckDB did not accept, read by Python as Store.load reads it, file by
    file: (the warnings and refusals, the records as (file, n, record), lines read)."""
    result = LoadResult()
    read_by_python: list[tuple[int, int, Record]] = []  # (file, n, record)
    python_lines = 0
    ends = dict(con.execute("SELECT file, max(n) FROM lines GROUP BY file").fetchall())
    for s in sources:
        i, path = s.index, s.path
        if s.python_only:
            named = len(result.warnings)
            for n, record in parse_fd(s.fd, path, result):
                python_lines += 1
                read_by_python.append((i, n, record))
            python_lines += len(result.warnings) - named
            continue
        for n, data in s.others:  # the snapshot's: complete lines, none of them the last
            python_lines += 1
            record = read_line(data, n, False, path, str(path), result)
            if record is not None:
                read_by_python.append((i, n, record))
        last = ends.get(i, 0)
        # a last line without a newline that a writer is still writing: not a warning
        written = being_written(s.fd, s.before.st_size)
        pieces = raw[i].split(b"\n") if i in raw else None
        for n, line in con.execute(
            "SELECT n, line FROM lines WHERE file = ? AND n NOT IN "
            "(SELECT n FROM good_lines WHERE file = ?) ORDER BY n",
            [i, i],
        ).fetchall():
            data = pieces[n - s.first - 1] if pieces is not None else line.encode("utf-8")
            if data.strip():
                python_lines += 1
                s.others.append((n, data))
            # the last piece of a file ending with a newline is empty (blank: skipped)
            record = read_line(data, n, n == last, path, str(path), result, None, written)
            if record is not None:
                read_by_python.append((i, n, record))
    return result, read_by_python, python_lines


# a record's start time as text that sorts as the time does: all are UTC, written as _STAMP,
# with no fraction or one of 3 or 6 digits (25, 29 or 32 characters; "" is oldest), so the
# fraction is padded to six digits
_STARTED = (
    "CASE strlen(started_at) WHEN 0 THEN '' "
    "WHEN 25 THEN substr(started_at, 1, 19) || '000000' "
    "WHEN 29 THEN substr(started_at, 1, 19) || substr(started_at, 21, 3) || '000' "
    "ELSE substr(started_at, 1, 19) || substr(started_at, 21, 6) END"
)


def _find_undecided(
    con: duckdb.DuckDBPyConnection, read_by_python: list[tuple[int, int, Record]]
) -> None:
    """Table ``newest`` (per key and machine: the newest start time, how many records, the
    line of the newest) and ``undecided``: the keys store.latest decides over the records
    of the key, where two share the newest start time or one was read by Python."""
    ident, t = ", ".join(_IDENT), _STARTED
    con.execute(
        f"CREATE TEMP TABLE newest AS SELECT {ident}, max({t}) AS t, count(*) AS c, "
        f"arg_max(file * {_LINES} + n, {t}) AS pick FROM good GROUP BY {ident}"
    )
    con.execute(
        "CREATE TEMP TABLE python_keys (entry VARCHAR, variant VARCHAR, cell VARCHAR, "
        "trial BIGINT, machine VARCHAR, machine_id VARCHAR)"
    )
    if read_by_python:
        keys_read = list(zip(*{_order(r) for _, _, r in read_by_python}, strict=True))
        con.execute(
            "INSERT INTO python_keys SELECT " + ", ".join(["unnest(?)"] * len(_IDENT)),
            [list(c) for c in keys_read],
        )
    # keys whose newest start time two records share
    con.execute(
        f"CREATE TEMP TABLE undecided AS SELECT DISTINCT {ident} FROM ("
        f"SELECT {ident} FROM python_keys UNION ALL SELECT {ident} FROM good "
        f"JOIN newest USING ({ident}) WHERE newest.c > 1 AND {t} = newest.t "
        f"GROUP BY {ident} HAVING count(*) > 1)"
    )


def _choose_records(
    con: duckdb.DuckDBPyConnection, read_by_python: list[tuple[int, int, Record]]
) -> None:
    """Table ``records``: the newest of each key and machine (the undecided ones decided by
    store.latest here), in the store's order."""
    ident = ", ".join(_IDENT)
    pool = list(read_by_python)
    keys = {tuple(row) for row in con.execute(f"SELECT {ident} FROM undecided").fetchall()}
    if keys:
        rows = con.execute(
            f"SELECT file, {_GOOD_COLUMNS} FROM good SEMI JOIN undecided USING ({ident})"
        ).fetchall()
        pool += [(row[0], row[1], _record(row[2:])) for row in rows]
    # in the store's order: of records that say the same, store.latest keeps the first
    pool.sort(key=lambda item: item[:2])
    con.execute(f"CREATE TEMP TABLE decided ({_SCHEMA})")
    decided = [r for r in latest(r for _, _, r in pool) if _order(r) in keys]
    _insert(con, decided, 0, "decided")
    # one table, in the store's order: by key, then machine (store.latest's). The order is
    # found on the narrow columns; the wide ones (tracebacks, tails) are joined once
    con.execute(
        f"CREATE TEMP TABLE chosen AS SELECT file, n, did, row_number() OVER (ORDER BY "
        f"{ident}) - 1 AS rid FROM (SELECT {ident}, pick // {_LINES} AS file, pick % {_LINES} "
        f"AS n, NULL::BIGINT AS did FROM newest ANTI JOIN undecided USING ({ident}) "
        f"UNION ALL SELECT {ident}, NULL, NULL, rid FROM decided)"
    )
    wide = _RECORD_COLUMNS.split(", ")
    con.execute(
        f"CREATE TABLE records AS SELECT c.rid, {', '.join('g.' + w for w in wide)} FROM good g "
        "JOIN chosen c USING (file, n) UNION ALL SELECT c.rid, "
        f"{', '.join('d.' + w for w in wide)} FROM decided d JOIN chosen c ON c.did = d.rid"
    )
    for table in ("newest", "undecided", "decided", "python_keys", "chosen"):
        con.execute(f"DROP TABLE {table}")


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (
        b.st_dev,
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
    )


def _save_snapshots(
    con: duckdb.DuckDBPyConnection, cache: Path, sources: Sequence[_Source]
) -> dict[str, tuple[int, str]]:
    """The snapshot of each file as read now, where it covers more than before. A file
    that changed while it was read keeps its old one (the next load catches up). Returns
    each file's (bytes, sha256) of a snapshot that covers the whole file as read and
    unchanged since, or {} where any file has none (no basis for a later load)."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}
    covered: dict[str, tuple[int, str]] = {}
    for s in sources:
        # a cache: a snapshot that cannot be written is simply not there next time
        saved = None
        with contextlib.suppress(OSError, ValueError, duckdb.Error):
            saved = _save_snapshot(con, cache, s)
        if saved is None and s.before.st_size == 0:
            saved = _EMPTY
        with contextlib.suppress(OSError):
            if (
                saved is not None
                and saved[0] == s.before.st_size
                and _same(s.before, os.stat(s.path))
            ):
                covered[s.path.name] = saved
    return covered if len(covered) == len(sources) else {}


def _note_identity(cache: Path, s: _Source) -> None:
    """A file with no line since its snapshot, whose bytes were checked now: its snapshot
    takes the file's identity (touched, copied back, or changed while the last one read it)
    so that the next load need not hash it again."""
    assert s.snap is not None
    read = appends.identity(s.before)
    if s.snap.file != read and appends.identity(os.stat(s.path, follow_symlinks=False)) == read:
        snapshot.save(cache, dataclasses.replace(s.snap, file=read))
        appends.forget_unless_from(cache, s.path.name, read)


def _save_snapshot(
    con: duckdb.DuckDBPyConnection, cache: Path, s: _Source
) -> tuple[int, str] | None:
    """Save the snapshot of ``s``; returns the (bytes, sha256) its snapshot now covers
    (None: it has none)."""
    if s.snap is not None:
        cut = s.tail.rfind(b"\n") + 1
        if not cut:
            if not s.tail and _result(s.prefix).hexdigest() == s.snap.sha256:
                _note_identity(cache, s)
                return s.snap.bytes, s.snap.sha256
            return None  # no line completed since
        digest = _result(s.prefix).copy()
        digest.update(memoryview(s.tail)[:cut])
        size = s.snap.bytes + cut
        lines = s.snap.lines + s.tail.count(b"\n", 0, cut)
        kept: Sequence[snapshot.Segment] = s.snap.segments
    elif s.whole is not None:
        digest, size, total, newlines, after = s.whole.result()
        row = con.execute("SELECT max(n) FROM lines WHERE file = ?", [s.index]).fetchone()
        # what was hashed is what the engine read: the file did not change meanwhile
        if not (
            size
            and total == s.before.st_size
            and _same(s.before, after)
            and _same(s.before, os.stat(s.path))
            and row is not None
            and row[0] == newlines + 1
        ):
            return None
        lines = newlines
        kept = ()
    else:
        return None
    base = s.first
    new = con.execute(
        "SELECT count(*) FROM good_lines WHERE file = ? AND n <= ?", [s.index, lines]
    ).fetchone()
    others_new = sum(base < n <= lines for n, _ in s.others)
    keep, first, _ = snapshot.plan_segments(
        kept, base, lines - base, new[0] if new else 0, others_new
    )
    segment = snapshot.write_segment(
        con,
        cache,
        s.path.name,
        f"SELECT {_GOOD_COLUMNS} FROM good_all WHERE file = {s.index} AND n > {first} "
        f"AND n <= {lines}",
        [(n, b) for n, b in s.others if first < n <= lines],
        first,
        lines - first,
        size - sum(k.bytes for k in keep),
    )
    sha = digest.hexdigest()
    # the file as it was read, if it did not change meanwhile: the next load trusts these
    # bytes while it is that file, or that file after the store's appends (appends.py)
    read = appends.identity(s.before)
    file = read if appends.identity(os.stat(s.path, follow_symlinks=False)) == read else None
    snapshot.save(
        cache,
        snapshot.Snapshot(s.path.name, size, sha, lines, (*keep, segment), digest.blocks(), file),
    )
    appends.forget_unless_from(cache, s.path.name, file)
    return size, sha
