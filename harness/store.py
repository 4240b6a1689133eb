"""The result store: a folder of JSON-lines files, one per machine, append-only.

Every record is appended as one line the moment it exists (flushed and fsynced, under an
exclusive lock), so an interrupted run loses nothing that completed and two runs on one
machine never interleave lines. Loading keeps every complete record, warns about a
truncated last line (a crash mid-write), names file:line for a corrupt line elsewhere,
migrates older schemas step by step and refuses newer ones.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records import SCHEMA, Record, RecordKey
from harness.validate import RecordRefused, safe_text, validate_record

__all__ = [
    "LoadResult",
    "MAX_LINE_BYTES",
    "MergeResult",
    "Refused",
    "Store",
    "StoreError",
    "latest",
    "migrate",
]

SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_LINE_BYTES = 1 << 20  # a record line longer than this is refused unread (R1)
QUARANTINE = "quarantine"  # beside records/: a copy of every line kept out, with the reason


class StoreError(Exception):
    pass


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


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(d: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored dict up to SCHEMA, one step at a time."""
    version = d.get("schema")
    if not isinstance(version, int):
        raise ValueError("record has no integer 'schema' field")
    if version > SCHEMA:
        raise ValueError(
            f"record schema {version} is newer than this harness understands ({SCHEMA}); "
            "upgrade the harness"
        )
    while version < SCHEMA:
        d = MIGRATIONS[version](d)
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
    duplicates: int = 0
    warnings: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)  # lines of the sources kept out


def _line_record(line: bytes) -> Record:
    """One stored line -> its Record (migrated, validated, text made safe); raises
    ValueError (RecordRefused names the field) for anything else."""
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"line is {len(line)} bytes long (at most {MAX_LINE_BYTES})")
    try:
        d = json.loads(line.decode("utf-8"))
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(d, dict):
        raise ValueError(f"not a JSON object but a JSON {type(d).__name__}")
    return validate_record(migrate(d))


def _parse_file(path: Path, result: LoadResult) -> None:
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    complete_end = raw.endswith(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_last = number == len(lines)
        try:
            record = _line_record(line)
        except Exception as exc:  # noqa: BLE001 - whatever a line holds, it is named, never raised
            what = safe_text(str(exc), 300)
            if isinstance(exc, RecordRefused):
                message = f"refused record kept out: {what}"
            elif is_last and not complete_end:
                message = "truncated last line kept out (a run was interrupted mid-write): " + what
            elif isinstance(exc, json.JSONDecodeError) and (
                exc.msg.startswith("Unterminated") or exc.pos >= len(line.rstrip()) - 1
            ):
                # JSON that simply stops: a write cut short, later appends went on after it
                message = (
                    "truncated line kept out (an earlier run was interrupted mid-write): " + what
                )
            else:
                message = f"corrupt record kept out: {what}"
            result.warnings.append(f"{path}:{number}: {message}")
            result.refused.append(Refused(path, number, message, line))
            continue
        result.records.append(record)


def _line(record: Record) -> str:
    # allow_nan=False: a NaN or infinity would be JSON no strict reader loads
    return json.dumps(record.to_dict(), allow_nan=False) + "\n"


def latest(records: Iterable[Record]) -> list[Record]:
    """The last stored record per key: what a rerun of the same cell replaced."""
    by_key: dict[RecordKey, Record] = {}
    for r in records:
        by_key[r.key] = r
    return sorted(by_key.values(), key=lambda r: r.key)


class Store:
    """results/records/*.jsonl; this machine appends to records/<host>.jsonl."""

    def __init__(self, root: str | os.PathLike[str], machine: str | None = None) -> None:
        self.root = Path(root)
        name = SAFE_NAME.sub("_", machine or socket.gethostname()) or "machine"
        self.path = self.root / f"{name}.jsonl"

    def files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob("*.jsonl"))

    def load(self) -> LoadResult:
        result = LoadResult()
        for path in self.files():
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

    def done_keys(self) -> set[RecordKey]:
        return {r.key for r in self.load().records}

    def append(self, record: Record) -> None:
        self._append_lines([_line(record)], self.path)

    def _append_lines(self, lines: list[str], path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(lines).encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
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
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def merge(self, sources: Iterable[str | os.PathLike[str]]) -> MergeResult:
        """Add the records of other machines' files (or folders of them), once each."""
        result = MergeResult()
        existing = {json.dumps(r.to_dict(), sort_keys=True) for r in self.load().records}
        for source in sources:
            src = Path(source)
            files = sorted(src.glob("*.jsonl")) if src.is_dir() else [src]
            for path in files:
                loaded = LoadResult()
                _parse_file(path, loaded)
                result.warnings.extend(loaded.warnings)
                result.refused.extend(loaded.refused)
                fresh = []
                for r in loaded.records:
                    text = json.dumps(r.to_dict(), sort_keys=True)
                    if text in existing:
                        result.duplicates += 1
                        continue
                    existing.add(text)
                    fresh.append(_line(r))
                if fresh:
                    machine = SAFE_NAME.sub("_", path.stem)
                    self._append_lines(fresh, self.root / f"{machine}.jsonl")
                    result.added += len(fresh)
        return result
