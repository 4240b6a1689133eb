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

__all__ = [
    "LoadResult",
    "MergeResult",
    "Store",
    "StoreError",
    "latest",
    "migrate",
]

SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


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


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


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


@dataclass
class LoadResult:
    records: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # "file:line: what" for each line kept out


@dataclass
class MergeResult:
    added: int = 0
    duplicates: int = 0
    warnings: list[str] = field(default_factory=list)


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
            d = json.loads(line.decode("utf-8"))
            if not isinstance(d, dict):
                raise ValueError("not a JSON object")
            record = Record.from_dict(migrate(d))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            if is_last and not complete_end:
                result.warnings.append(
                    f"{path}:{number}: truncated last line kept out (a run was interrupted "
                    f"mid-write): {str(exc)[:200]}"
                )
            elif isinstance(exc, json.JSONDecodeError) and (
                exc.msg.startswith("Unterminated") or exc.pos >= len(line.rstrip()) - 1
            ):
                # JSON that simply stops: a write cut short, later appends went on after it
                result.warnings.append(
                    f"{path}:{number}: truncated line kept out (an earlier run was interrupted "
                    f"mid-write): {str(exc)[:200]}"
                )
            else:
                result.warnings.append(
                    f"{path}:{number}: corrupt record kept out: {str(exc)[:200]}"
                )
            continue
        result.records.append(record)


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

    def done_keys(self) -> set[RecordKey]:
        return {r.key for r in self.load().records}

    def append(self, record: Record) -> None:
        self._append_lines([json.dumps(record.to_dict(), sort_keys=False) + "\n"], self.path)

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
                fresh = []
                for r in loaded.records:
                    text = json.dumps(r.to_dict(), sort_keys=True)
                    if text in existing:
                        result.duplicates += 1
                        continue
                    existing.add(text)
                    fresh.append(json.dumps(r.to_dict()) + "\n")
                if fresh:
                    machine = SAFE_NAME.sub("_", path.stem)
                    self._append_lines(fresh, self.root / f"{machine}.jsonl")
                    result.added += len(fresh)
        return result
