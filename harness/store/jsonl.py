"""The result store: a folder of JSON-lines files, one per machine, append-only.

Every record is appended as one line the moment it exists (flushed and fsynced, under an
exclusive lock), so an interrupted run loses nothing that completed and two runs on one
machine never interleave lines. Loading keeps every complete record, warns about a
truncated last line (a crash mid-write) unless a writer holds the file's lock or the file
grew meanwhile (a line being written: kept out without a word), names file:line for a
corrupt line elsewhere, migrates older schemas step by step and refuses newer ones.

Only regular files are record files: a FIFO, a device, a folder or a dangling link named
``*.jsonl`` is named in a warning and skipped. Files are read in chunks: a line longer
than MAX_LINE_BYTES is refused without ever being held whole (its head is quarantined).

Identity: a record belongs to the machine that ran it (``Record.machine_key``: the name
and id the store stamps on append). ``latest`` keeps, per key and per machine, the record
that started last; which file a record sits in plays no part. ``merge`` brings other
machines' files in under a lock on the whole store: identical records once, a record of
the same run with other content flagged and kept out, each imported record marked with
the file it came from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import fcntl
import functools
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.envs.provenance import MACHINE_ID_FILE, default_machine_name, machine_id
from harness.outcomes import Outcome
from harness.store import appends
from harness.store.records import SCHEMA, MachineKey, Record, RecordKey
from harness.store.validate import RecordRefused, safe_text, validate_record

__all__ = [
    "LoadResult",
    "MAX_LINE_BYTES",
    "MergeResult",
    "NotARecordFile",
    "Refused",
    "Store",
    "StoreError",
    "being_written",
    "has_long_line",
    "iter_lines",
    "latest",
    "machine_name",
    "migrate",
    "not_regular",
    "open_record_file",
    "parse_bytes",
    "read_line",
    "record_files",
]

SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_LINE_BYTES = 1 << 20  # a record line longer than this is refused unread (R1)
HEAD_BYTES = 4096  # what is kept (and quarantined) of a line longer than MAX_LINE_BYTES
CHUNK_BYTES = 1 << 20  # record files are read this much at a time
QUARANTINE = "quarantine"  # beside records/: a copy of every line kept out, with the reason


class StoreError(Exception):
    pass


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotARecordFile(OSError):
    """A path named like a record file that is not a regular file (or a link to one)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path}: not a regular file ({kind}); skipped")
        self.path = path
        self.kind = kind


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (a link followed), else None."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "a dangling link" if os.path.islink(path) else "gone"
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return None if stat.S_ISREG(info.st_mode) else _kind(info.st_mode)


def record_files(folder: Path) -> tuple[list[Path], list[str]]:
    """The ``*.jsonl`` of ``folder`` that are regular files, sorted, and a warning naming
    each that is not (a FIFO would hang a read, /dev/zero never end one)."""
    if not folder.is_dir():
        return [], []
    files, warnings = [], []
    for path in sorted(folder.glob("*.jsonl")):
        kind = not_regular(path)
        if kind is None:
            files.append(path)
        elif kind != "gone":  # removed since the listing: nothing to say
            warnings.append(str(NotARecordFile(path, kind)))
    return files, warnings


def open_record_file(path: Path) -> int:
    """A read-only descriptor of the regular file ``path``; NotARecordFile for anything
    else. Opened without blocking (a FIFO swapped in after the listing must not hang the
    open), then checked on the descriptor itself."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotARecordFile(path, _kind(mode))
    return fd


def iter_lines(
    fd: int,
    start: int = 0,
    end: int | None = None,
    limit: int = MAX_LINE_BYTES,
    chunk: int = CHUNK_BYTES,
) -> Iterator[tuple[bytes, int, bool]]:
    """(line, length, ends with a newline) for each line of the bytes ``start`` to ``end``
    (None: to the end of the file, however long it grows) of open file ``fd``, read
    ``chunk`` bytes at a time. A line longer than ``limit`` is never held whole: only its
    first HEAD_BYTES come, with its real length. The last item is what follows the last
    newline (b"" where the file ends with one), as ``bytes.split`` gives it."""
    held = bytearray()
    length = 0
    at = start
    while end is None or at < end:
        data = os.pread(fd, chunk if end is None else min(chunk, end - at), at)
        if not data:
            break
        at += len(data)
        if length > limit and len(held) >= HEAD_BYTES and b"\n" not in data:
            # the middle of a long line whose head is kept: count it, skip a hole
            length += len(data)
            skipped = _hole_after(fd, at, end)  # a hole holds zeros, no newline
            length += skipped
            at += skipped
            continue
        pieces = data.split(b"\n")
        for i, piece in enumerate(pieces):
            if length + len(piece) <= limit:
                held += piece
            elif len(held) < HEAD_BYTES:
                held += piece[: HEAD_BYTES - len(held)]
            length += len(piece)
            if i < len(pieces) - 1:
                yield bytes(held if length <= limit else held[:HEAD_BYTES]), length, True
                held = bytearray()
                length = 0
    yield bytes(held if length <= limit else held[:HEAD_BYTES]), length, False


def _hole_after(fd: int, at: int, end: int | None) -> int:
    """How many bytes from ``at`` are a hole of a sparse file (0 where the system cannot
    tell: SEEK_DATA is Linux's and a few others')."""
    if not hasattr(os, "SEEK_DATA"):
        return 0
    try:
        data = os.lseek(fd, at, os.SEEK_DATA)
    except OSError:  # ENXIO: nothing but a hole to the end of the file
        try:
            data = os.fstat(fd).st_size
        except OSError:
            return 0
    stop = data if end is None else min(data, end)
    return max(0, stop - at)


def has_long_line(
    fd: int, start: int = 0, end: int | None = None, limit: int = MAX_LINE_BYTES
) -> bool:
    """True when a line of the bytes ``start`` to ``end`` of ``fd`` is longer than
    ``limit``: read in chunks no longer than ``limit`` + 1, so that only the lines that
    cross a chunk's edge need counting (two memchr calls a chunk)."""
    size = min(CHUNK_BYTES, limit + 1)
    run = 0  # bytes since the last newline
    at = start
    while end is None or at < end:
        data = os.pread(fd, size if end is None else min(size, end - at), at)
        if not data:
            break
        at += len(data)
        first = data.find(b"\n")
        if first < 0:
            run += len(data)
        else:
            if run + first > limit:
                return True
            run = len(data) - data.rfind(b"\n") - 1
        if run > limit:
            return True
    return False


def being_written(fd: int, read_up_to: int) -> bool:
    """True when a writer holds the file's lock (Store._append_lines) or the file grew
    past what was read: its last line without a newline is one being written, not one a
    crash cut."""
    try:
        if os.fstat(fd).st_size > read_up_to:
            return True
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
    # schema 1 (harness 0.0.x) named the outcome "status", kept one "tail" of output and
    # had no variant kind; the kind is recovered from the variant name's prefix.
    d = dict(d)
    d["outcome"] = d.pop("status")
    d["stderr_tail"] = d.pop("tail", "")
    name = d.get("variant", "")
    d.setdefault(
        "kind",
        next(
            (
                k
                for k in ("baseline", "workaround", "dead_end", "control")
                if name.replace("-", "_").startswith(k)
            ),
            "baseline",
        ),
    )
    d["schema"] = 2
    return d


def _v2_to_v3(d: dict[str, Any]) -> dict[str, Any]:
    # schema 2 recorded a variant's own signature (a related error) as "reproduced" too.
    # The record alone cannot tell which signature matched (it does not carry the entry's
    # signatures): the report re-reads such a record against the entry it belongs to
    # (harness.aggregate, "reclassify"), so nothing changes here but the version.
    d = dict(d)
    d["schema"] = 3
    return d


def _v3_to_v4(d: dict[str, Any], source: Path | None) -> dict[str, Any]:
    # schemas up to 3 had no machine in the record: the machine was the record file's name
    # (the --machine name or the host name; merge kept the name). Its id was never recorded.
    d = dict(d)
    provenance = d.get("provenance")
    host = provenance.get("host", "") if isinstance(provenance, dict) else ""
    d["machine"] = machine_name(source.stem if source is not None else str(host))
    d["machine_id"] = ""
    d["imported_from"] = ""
    d["schema"] = 4
    return d


def _v4_to_v5(d: dict[str, Any]) -> dict[str, Any]:
    # schema 4 had no version advice: every record ran in its own cell's environment
    d = dict(d)
    d.setdefault("ran_in", "")
    d.setdefault("requires", {})
    d["schema"] = 5
    return d


Migration = Callable[[dict[str, Any], "Path | None"], dict[str, Any]]
MIGRATIONS: dict[int, Migration] = {
    1: lambda d, source: _v1_to_v2(d),
    2: lambda d, source: _v2_to_v3(d),
    3: _v3_to_v4,
    4: lambda d, source: _v4_to_v5(d),
}


def machine_name(text: str) -> str:
    """A machine name as it names a record file: letters, digits, _ . - only."""
    return SAFE_NAME.sub("_", text) or "machine"


def migrate(d: dict[str, Any], source: Path | None = None) -> dict[str, Any]:
    """Bring a stored dict up to SCHEMA, one step at a time (``source``: the file it is in)."""
    version = d.get("schema")
    # a boolean is an int to Python: "schema": true is no schema 1
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(
            f"schema: {safe_text(repr(version), 60)} is not a record schema (an integer from 1 "
            f"to {SCHEMA})"
        )
    if version < 1:
        raise ValueError(
            f"schema: {version} is not a record schema (an integer from 1 to {SCHEMA})"
        )
    if version > SCHEMA:
        raise ValueError(
            f"record schema {version} is newer than this harness understands ({SCHEMA}); "
            "upgrade the harness"
        )
    while version < SCHEMA:
        d = MIGRATIONS[version](d, source)
        version = d["schema"]
    return d


@dataclass(frozen=True)
class Refused:
    """A line kept out of the store's records: where, why, and its bytes."""

    path: Path
    line: int
    reason: str
    raw: bytes

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class LoadResult:
    records: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # "file:line: what" for each line kept out
    refused: list[Refused] = field(default_factory=list)  # the same lines, for quarantine


@dataclass
class MergeResult:
    added: int = 0
    duplicates: int = 0  # records already stored, identical: not added again
    # records of a stored run (same key, machine and start) whose content differs: kept
    # out, each named in ``warnings`` with file:line and the fields that differ
    conflicts: int = 0
    warnings: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)  # lines of the sources kept out


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key is given once (of two, the last won)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {twice!r} is given twice in one object")
    return d


def _line_record(line: bytes, path: Path | None = None, length: int | None = None) -> Record:
    """One stored line -> its Record (migrated, validated, text made safe); raises
    ValueError (RecordRefused names the field) for anything else. ``length``: the line's
    real length, where ``line`` is only its head (iter_lines)."""
    length = len(line) if length is None else length
    if length > MAX_LINE_BYTES:
        raise ValueError(f"line is {length} bytes long (at most {MAX_LINE_BYTES})")
    try:
        d = json.loads(line.decode("utf-8"), object_pairs_hook=_once_each)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(d, dict):
        raise ValueError(f"not a JSON object but a JSON {type(d).__name__}")
    return validate_record(migrate(d, path))


def _parse_file(path: Path, result: LoadResult) -> None:
    for _, record in _parse_lines(path, result):
        result.records.append(record)


def parse_bytes(raw: bytes, path: Path, result: LoadResult, label: str | None = None) -> None:
    """The records of a record file's bytes (e.g. ``git show REV:path``), into ``result``;
    ``path`` names the file (its name is the machine of old records), ``label`` the place
    warnings name (default: ``path``)."""
    for _, record in _parse_raw(raw, path, result, label or str(path)):
        result.records.append(record)


def _parse_lines(path: Path, result: LoadResult) -> Iterator[tuple[int, Record]]:
    """(line number, record) of each complete record of ``path``, read in chunks; the
    others are kept out (``result.warnings`` and ``result.refused`` name them). A path
    that is not a regular file is named and skipped."""
    try:
        fd = open_record_file(path)
    except NotARecordFile as exc:
        result.warnings.append(str(exc))
        return
    except FileNotFoundError:
        return  # removed since the listing
    try:
        yield from parse_fd(fd, path, result)
    finally:
        os.close(fd)


def parse_fd(
    fd: int, path: Path, result: LoadResult, start: int = 0, first: int = 0
) -> Iterator[tuple[int, Record]]:
    """(line number, record) of the lines of open record file ``fd`` from byte ``start``
    (numbered after ``first`` lines), as Store.load reads them."""
    number = first
    read = start
    for line, length, newline in iter_lines(fd, start):
        number += 1
        read += length + newline
        in_progress = not newline and line.strip() != b"" and being_written(fd, read)
        record = read_line(line, number, not newline, path, str(path), result, length, in_progress)
        if record is not None:
            yield number, record


def _parse_raw(
    raw: bytes, path: Path, result: LoadResult, where: str
) -> Iterator[tuple[int, Record]]:
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    for number, line in enumerate(lines, start=1):
        record = read_line(
            line, number, number == len(lines) and not complete_end, path, where, result
        )
        if record is not None:
            yield number, record


def read_line(
    line: bytes,
    number: int,
    cut_short: bool,
    path: Path,
    where: str,
    result: LoadResult,
    length: int | None = None,
    in_progress: bool = False,
) -> Record | None:
    """Line ``number`` of a record file as the store reads it: its Record, or None for a
    blank line or one kept out (named in ``result.warnings`` and ``result.refused``).
    ``cut_short``: the last line of a file that does not end with a newline;
    ``in_progress``: that line is being written (being_written): not yet a record, kept
    out without a word; ``length``: the line's length where ``line`` is its head."""
    if not line.strip() and (length is None or length <= MAX_LINE_BYTES):
        return None
    try:
        return _line_record(line, path, length)
    except Exception as exc:  # noqa: BLE001 - whatever a line holds, it is named, never raised
        if cut_short and in_progress:
            return None  # the next read finds it complete
        what = safe_text(str(exc), 300)
        if isinstance(exc, RecordRefused):
            message = f"refused record kept out: {what}"
        elif cut_short:
            message = "truncated last line kept out (a run was interrupted mid-write): " + what
        elif isinstance(exc, json.JSONDecodeError) and (
            exc.msg.startswith("Unterminated") or exc.pos >= len(line.rstrip()) - 1
        ):
            # JSON that simply stops: a write cut short, later appends went on after it
            message = "truncated line kept out (an earlier run was interrupted mid-write): " + what
        else:
            message = f"corrupt record kept out: {what}"
        result.warnings.append(f"{where}:{number}: {message}")
        result.refused.append(Refused(path, number, message, line))
        return None


def _line(record: Record) -> str:
    # allow_nan=False: a NaN or infinity would be JSON no strict reader loads
    return json.dumps(record.to_dict(), allow_nan=False) + "\n"


_EPOCH = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def _started(r: Record) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(r.started_at)
    except ValueError:
        return _EPOCH  # no (or no readable) start time: older than any that has one
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _content(r: Record) -> str:
    """What a record says, without where it was imported from: equal for the same run."""
    d = r.to_dict()
    d.pop("imported_from", None)
    return json.dumps(d, sort_keys=True)


def latest(records: Iterable[Record]) -> list[Record]:
    """Per key and per machine, the record that started last: what a rerun replaced.

    Records of different machines are all kept (one per key per machine; the machine is
    ``Record.machine_key``). Which file a record came from, and in which order the files
    were read, plays no part: a tie in start time (to the second) goes to the larger
    content, the same whatever the order. Sorted by key, then machine.
    """
    best: dict[tuple[RecordKey, MachineKey], tuple[dt.datetime, Record]] = {}
    for r in records:
        ident = (r.key, r.machine_key)
        t = _started(r)
        held = best.get(ident)
        if held is None or t > held[0] or (t == held[0] and _content(r) > _content(held[1])):
            best[ident] = (t, r)
    return sorted((r for _, r in best.values()), key=lambda r: (r.key, r.machine_key))


class Store:
    """results/records/*.jsonl; this machine appends to records/<machine name>.jsonl.

    ``machine`` is the name (``--machine``; default provenance.default_machine_name: the host
    name and the start of the machine id, so that no default collides with a committed
    file). The machine's id is made on first use (provenance.machine_id) and stamped, with
    the name, on every record this store appends; a store that only reads makes neither.
    """

    def __init__(self, root: str | os.PathLike[str], machine: str | None = None) -> None:
        self.root = Path(root)
        self._given = machine

    @functools.cached_property
    def name(self) -> str:
        return machine_name(self._given or self._writing(default_machine_name, self.root))

    @functools.cached_property
    def path(self) -> Path:
        return self.root / f"{self.name}.jsonl"

    @functools.cached_property
    def machine(self) -> MachineKey:
        return MachineKey(self.name, self._writing(machine_id, self.root))

    def _writing(self, make: Callable[[Path], str], folder: Path) -> str:
        """The machine's id, made in the records folder on first use: a folder that cannot
        take it (read-only, full) is the store's error, named, as a record's append is."""
        try:
            return make(folder)
        except OSError as exc:
            raise StoreError(
                f"{folder}: cannot write this machine's id ({MACHINE_ID_FILE}): "
                f"{exc.strerror or exc}; make the folder writable and run again"
            ) from exc

    def files(self) -> list[Path]:
        """The record files: the regular ``*.jsonl`` files of the folder."""
        return record_files(self.root)[0]

    def scan(self) -> tuple[list[Path], list[str]]:
        """The record files, and a warning naming each ``*.jsonl`` that is not one."""
        return record_files(self.root)

    def load(self) -> LoadResult:
        files, skipped = self.scan()
        result = LoadResult(warnings=list(skipped))
        for path in files:
            _parse_file(path, result)
        return result

    @property
    def quarantine_dir(self) -> Path:
        return self.root.parent / QUARANTINE

    def quarantine(self, refused: Iterable[Refused]) -> list[str]:
        """Copy each refused line, with where it was and why, to quarantine/<file>.jsonl
        (once: a line already there is not added again). The store itself is append-only
        and keeps the line. Returns warnings for what could not be written."""
        by_file: dict[str, list[Refused]] = {}
        for r in refused:
            by_file.setdefault(SAFE_NAME.sub("_", r.path.name), []).append(r)
        problems = []
        for name, items in by_file.items():
            target = self.quarantine_dir / name
            try:
                seen = set()
                if target.is_file():
                    for known in target.read_bytes().splitlines():
                        with contextlib.suppress(ValueError, RecursionError):
                            d = json.loads(known)
                            seen.add((d.get("source"), d.get("line")))
                lines = []
                for r in items:
                    text = safe_text(r.raw.decode("utf-8", "replace"), MAX_LINE_BYTES)
                    source = r.where
                    if (source, text) in seen:
                        continue
                    seen.add((source, text))
                    entry = {"source": source, "reason": r.reason, "line": text}
                    lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
                if lines:
                    self._append_lines(lines, target)
            except (OSError, StoreError) as exc:
                problems.append(f"{target}: cannot quarantine {len(items)} line(s): {exc}")
        return problems

    def done_keys(self, records: Iterable[Record] | None = None) -> set[RecordKey]:
        """Keys this machine has stored (``--resume``): another machine's records do not
        count, nor an ``env_failed`` one (it measured nothing: the environment may build
        once the index answers or the disk has room, so a resume tries it again)."""
        me = self.machine
        pool = self.load().records if records is None else records
        return {r.key for r in pool if r.machine_key == me and r.outcome is not Outcome.ENV_FAILED}

    def append(self, record: Record) -> None:
        """Store a record of this machine's run, stamped with this machine's name and id."""
        me = self.machine
        record = dataclasses.replace(record, machine=me.name, machine_id=me.id, imported_from="")
        self._append_lines([_line(record)], self.path)

    def _append_lines(self, lines: list[str], path: Path) -> None:
        self._append_bytes("".join(lines).encode("utf-8"), path)

    def _append_bytes(self, data: bytes, path: Path) -> None:
        """Append ``data`` (whole lines) to record file ``path``, under its lock, on a line
        of its own; a failed append leaves the file as it was."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # never through a link: a record file that points outside the store is refused
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP or os.path.islink(path):
                raise StoreError(
                    f"{path}: is a link (to {os.readlink(path)!r}); the store never writes "
                    "through a link: replace it with a file"
                ) from exc
            raise StoreError(f"{path}: cannot append record: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                before = os.fstat(fd)
                size = before.st_size
                if size:
                    # a previous writer died mid-line: start ours on a fresh line so the
                    # truncated one stays alone (and is reported) instead of eating ours
                    with open(path, "rb") as f:
                        f.seek(size - 1)
                        if f.read(1) != b"\n":
                            data = b"\n" + data
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            except OSError as exc:
                # leave no half line behind us: cut the file back to where we started
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StoreError(
                        f"{path}: disk full while appending a record; the store is intact up to "
                        "the last complete record. Free space and rerun with --resume."
                    ) from exc
                raise StoreError(f"{path}: cannot append record: {exc}") from exc
            else:
                # still under the lock: the note the report's snapshot needs to trust the
                # bytes before ours without reading them (a note never fails an append)
                with contextlib.suppress(OSError, ValueError):
                    appends.note(path.parent, path.name, before, os.fstat(fd))
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The whole store, exclusively: two merges into one store run one after the other.
        A folder that cannot hold the lock (read-only) is the store's error: nothing merged."""
        lock = self.root / ".merge.lock"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise StoreError(
                f"{lock}: cannot take the store's lock: {exc.strerror or exc}; nothing was merged"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def merge(self, sources: Iterable[str | os.PathLike[str]]) -> MergeResult:
        """Add the records of other machines' files (or folders of them), once each.

        A record is the same run as a stored one when key, machine (name and id) and start
        time agree: identical content is a duplicate (skipped), other content a conflict
        (kept out and named). New records go to the file of the machine that ran them,
        marked with the name of the file they came from (``imported_from``).
        """
        result = MergeResult()
        with self._locked():
            # a stored record's content is compared only when a source names the same run
            # (computed for every stored record, it was two thirds of a merge's time)
            stored: dict[tuple[RecordKey, MachineKey, str], Record] = {}
            for r in self.load().records:
                stored.setdefault((r.key, r.machine_key, r.started_at), r)
            own = self._writing(machine_id, self.root)
            for source in sources:
                src = Path(source)
                if src.is_dir():
                    files, skipped = record_files(src)
                    result.warnings.extend(skipped)
                else:
                    files = [src]
                for path in files:
                    loaded = LoadResult()
                    fresh: dict[str, list[str]] = {}
                    for number, r in _parse_lines(path, loaded):
                        ident = (r.key, r.machine_key, r.started_at)
                        held = stored.get(ident)
                        if held is not None:
                            if _content(held) == _content(r):
                                result.duplicates += 1
                            else:
                                result.conflicts += 1
                                result.warnings.append(
                                    f"{path}:{number}: conflicts with the stored record of the "
                                    f"same run ({r.key.id} on {r.machine_key} started "
                                    f"{r.started_at or '?'}): {_differences(held, r)} "
                                    "differ; the stored one is kept"
                                )
                            continue
                        if r.machine_id and r.machine_id == own:
                            # this machine's runs are stored here by `run`; a record of
                            # another file claiming its id would speak for its measurement
                            result.conflicts += 1
                            result.warnings.append(
                                f"{path}:{number}: claims this machine's id ({own}, "
                                f"{r.key.id} started {r.started_at or '?'}) but this machine "
                                "stored no such run; a merge adds other machines' records: "
                                "kept out"
                            )
                            continue
                        r = dataclasses.replace(r, imported_from=r.imported_from or path.name)
                        stored[ident] = r
                        fresh.setdefault(r.machine, []).append(_line(r))
                    result.warnings.extend(loaded.warnings)
                    result.refused.extend(loaded.refused)
                    for machine, lines in fresh.items():
                        self._append_lines(lines, self.root / f"{machine_name(machine)}.jsonl")
                        result.added += len(lines)
        return result


def _differences(a: Record, b: Record) -> str:
    da, db = a.to_dict(), b.to_dict()
    names = [k for k in da if k != "imported_from" and da.get(k) != db.get(k)]
    return ", ".join(names) or "nothing"
