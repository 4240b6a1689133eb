"""The store's one door for the report: the newest records of the entries that changed since
a given state, with the warnings of their reading; and the records of another state of the
store (a folder, a file, a git revision), for ``report --since`` and ``diff``.

Behind the door: the columnar read (columnar.py), the snapshots of the record files
(snapshot.py, under results/.cache/snapshot), the writer's append notes (appends.py) and
the quarantine of refused lines (jsonl.py). A caller keeps the ``state`` a read returns and
hands it to the next read; it is the store's to interpret.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError
from harness.store import columnar
from harness.store.appends import cache_dir
from harness.store.jsonl import LoadResult, Store, latest, parse_bytes
from harness.store.records import Record

__all__ = [
    "Changes",
    "StoreState",
    "UnreadableRecords",
    "changed_since",
    "newest_at",
    "records_at",
    "stored_size",
]

RECORDS = "results/records"  # the record store's folder in a project's git tree

# per record file, the (bytes, sha256) its snapshot covered when it was read whole
StoreState = Mapping[str, tuple[int, str]]


class UnreadableRecords(InputError):
    """A state of the store cannot be read: str() says which and why."""


@dataclass
class Changes:
    """What ``changed_since`` read."""

    table: (
        columnar.RecordTable
    )  # the newest records per key and machine (``touched``: of which entries)
    warnings: list[str]  # lines kept out (file:line), and what could not be quarantined
    # the state to read from next time (empty: a later read cannot start from this one)
    state: StoreState


def stored_size(records_dir: Path) -> str:
    """The record files' size, for a progress line."""
    size = 0
    for path in Store(records_dir).files():
        with contextlib.suppress(OSError):  # (gone since the listing: the read says so)
            size += path.stat().st_size
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size:,} bytes"


def changed_since(
    records_dir: Path,
    since: StoreState | None = None,
    *,
    snapshots: bool = True,
    write: bool = True,
) -> Changes:
    """The newest records of the store at ``records_dir``: of every entry, or, where
    ``since`` (a state an earlier read returned) still holds, of the entries a line was
    appended to since (``table.touched``; every other entry's are as they were).
    ``snapshots``: read and renew the snapshots (results/.cache/snapshot); ``write``: False
    writes nothing (no snapshot, no quarantine), as ``report --check``."""
    store = Store(records_dir)
    table = columnar.load_latest(
        store, cache_dir(records_dir) if snapshots else None, update=write, since=since
    )
    # the store keeps a refused line; its copy in quarantine/ says where it was and why
    problems = store.quarantine(table.refused) if write else []
    return Changes(table, [*table.warnings, *problems], table.covered)


def _git(repo: Path, *args: str) -> bytes:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnreadableRecords(f"git {' '.join(args)}: {exc}") from exc
    if out.returncode != 0:
        raise UnreadableRecords(
            f"git {' '.join(args)}: {out.stderr.decode('utf-8', 'replace').strip() or 'failed'}"
        )
    return out.stdout


def _from_git(spec: str, repo: Path) -> LoadResult:
    rev, _, path = spec.partition(":")
    try:
        _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except UnreadableRecords:
        raise UnreadableRecords(
            f"{spec!r} is neither a record file or folder nor a git revision of {repo}"
        ) from None
    if path:
        paths = [path]
    else:
        listing = _git(repo, "ls-tree", "-r", "--name-only", rev, "--", RECORDS + "/")
        paths = [p for p in listing.decode().splitlines() if p.endswith(".jsonl")]
    result = LoadResult()
    for p in paths:
        parse_bytes(_git(repo, "show", f"{rev}:{p}"), Path(p), result, label=f"{rev}:{p}")
    return result


def records_at(spec: str, repo: Path) -> LoadResult:
    """Every record ``spec`` names, with the warnings of reading them: a record folder, one
    record file, or a git revision of results/records/ (``REV:path`` for one file), read
    with ``git show`` without touching the work tree."""
    path = Path(spec)
    if not path.is_absolute() and not path.exists():
        path = repo / spec
    if path.is_dir():
        return Store(path).load()
    if path.is_file():
        loaded = LoadResult()
        parse_bytes(path.read_bytes(), path, loaded)
        return loaded
    return _from_git(spec, repo)


def newest_at(spec: str, repo: Path) -> list[Record]:
    """The newest record per key and machine of every record ``spec`` names (``records_at``)."""
    return latest(records_at(spec, repo).records)
