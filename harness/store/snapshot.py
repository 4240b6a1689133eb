"""Columnar snapshots of record files: what harness/store/columnar.py derived from a record
file's lines, kept so that the next report reads and checks only the lines appended since.

The store is append-only (runs and ``merge`` append lines), so what a file's first B bytes
gave stays true while the file still starts with those bytes. A snapshot of a record file
holds, for its first B bytes (B always ends just after a newline: a last line without
one may still be being written and is never snapshotted):

- a manifest, ``<file name>.json``: B, a digest of the B bytes (``BlockDigest``: a sha256 of
  the sha256s of its 8 MiB blocks) and those blocks' sha256s, their line count, the
  identity of the record file it read (harness/store/appends.py), the fingerprint of the
  code that read them (``fingerprint``) and the segments;
- segments, each a run of consecutive lines in two Parquet files (written by DuckDB):
  the lines the engine accepted (line number ``n`` and the typed columns), and the other
  non-blank lines as they are (``n``, the bytes), which Python reads again on every load
  (``store.read_line``: so its records, warnings and refused lines are exactly a full
  read's). New lines add a segment; a segment as large as the one before it is merged
  into it, so a file has few segments and an append never rewrites the whole file's rows.

A snapshot is used only when its manifest and segment files are well-formed and their
hashes match, the fingerprint is this harness's, and the record file still starts with
the B bytes it covers: hashed again on every use, unless the file is still the one it
read or the store's append note vouches that it only grew by the store's appends since
(harness/store/appends.py). Anything else, and the file is read in
full: the cache is never a source of truth, and deleting ``results/.cache/`` is always
safe. Files are written under unique names and the manifest is replaced atomically, so
concurrent reports never see one another's half-written files; files no manifest names
are removed once they are a few minutes old (a record file removed or renamed: its
snapshot goes too).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import secrets
import stat
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from harness.atomic import write_atomically
from harness.envs.provenance import source_digest
from harness.paths import OutsideProject, remove_files, safe_folder
from harness.store.appends import Identity, cache_dir
from harness.store.records import SCHEMA
from harness.store.sql import path_literal

__all__ = [
    "GRACE_S",
    "Segment",
    "Snapshot",
    "cache_dir",
    "clean",
    "BlockDigest",
    "digest_bytes",
    "digest_lines",
    "digest_prefix",
    "fingerprint",
    "good_parquet",
    "open_snapshot",
    "other_lines",
    "plan_segments",
    "refusal",
    "resume",
    "save",
    "write_segment",
]

FORMAT = 3  # the manifest and segment layout: a change makes every snapshot stale
GRACE_S = 300.0  # an unreferenced file younger than this may be a concurrent writer's
MAX_MANIFEST_BYTES = 1 << 20
_CHUNK = 1 << 23
_SHA = re.compile(r"[0-9a-f]{64}")


def refusal(cache: Path) -> str | None:
    """Why the snapshots may not be read or written in ``cache`` (results/.cache/snapshot):
    it, or results/.cache, is a link (or not a folder), or it lies outside results/;
    None when it may (harness/paths.py)."""
    try:
        safe_folder(cache.parent.parent, cache)
    except OutsideProject as exc:
        return str(exc)
    return None


@functools.cache
def fingerprint() -> str:
    """What decides how lines are read: the harness's source, DuckDB's and Python's
    versions, the record schema and this layout."""
    h = hashlib.sha256()
    h.update(f"{FORMAT}\0{SCHEMA}\0{duckdb.__version__}\0{platform.python_version()}\0".encode())
    h.update(source_digest().encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Segment:
    """Lines ``first + 1`` to ``first + lines`` of a record file, ``bytes`` long."""

    first: int
    lines: int
    bytes: int
    good: str  # Parquet file: n and the typed columns of the lines the engine accepted
    good_rows: int
    good_sha256: str
    other: str  # Parquet file: n and the bytes of the other non-blank lines
    other_rows: int
    other_sha256: str


@dataclass(frozen=True)
class Snapshot:
    name: str  # the record file's name
    bytes: int
    sha256: str
    lines: int
    segments: tuple[Segment, ...]
    # the sha256s of the full blocks of the bytes it covers (BlockDigest.blocks)
    blocks: tuple[str, ...] = ()
    # the record file's identity when it was read (None: it changed while it was read)
    file: Identity | None = None

    def to_json(self) -> bytes:
        d = {
            "format": FORMAT,
            "fingerprint": fingerprint(),
            "name": self.name,
            "bytes": self.bytes,
            "sha256": self.sha256,
            "lines": self.lines,
            "segments": [vars(s) for s in self.segments],
            "blocks": list(self.blocks),
            "file": None if self.file is None else list(self.file),
        }
        return json.dumps(d, indent=1).encode()


def _manifest(cache: Path, name: str) -> Path:
    return cache / f"{name}.json"


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _file_name(value: Any, name: str, kind: str) -> str:
    if not (
        isinstance(value, str)
        and value.startswith(name + ".")
        and re.fullmatch(r"\.[0-9a-f]{32}\." + kind + r"\.parquet", value[len(name) :])
    ):
        raise ValueError(f"not a {kind} segment file name: {value!r}")
    return value


def _sha(value: Any) -> str:
    if not (isinstance(value, str) and _SHA.fullmatch(value)):
        raise ValueError(f"not a sha256: {value!r}")
    return value


def _read_regular(path: Path, most: int | None = None) -> bytes:
    """A regular file's bytes (not a link, a device or a FIFO), at most ``most``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if most is not None and info.st_size > most:
            raise ValueError(f"{path} is over {most} bytes")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def _parse(data: bytes, name: str) -> Snapshot:
    d = json.loads(data)
    if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("name") != name:
        raise ValueError("not a manifest of this record file in this format")
    if d.get("fingerprint") != fingerprint():
        raise ValueError("made by another harness")
    raw = d.get("segments")
    if not isinstance(raw, list) or not raw:
        raise ValueError("no segments")
    segments = []
    first = size = 0
    for s in raw:
        if not isinstance(s, dict) or set(s) != set(Segment.__dataclass_fields__):
            raise ValueError("a segment with other fields")
        seg = Segment(
            first=_count(s["first"]),
            lines=_count(s["lines"]),
            bytes=_count(s["bytes"]),
            good=_file_name(s["good"], name, "good"),
            good_rows=_count(s["good_rows"]),
            good_sha256=_sha(s["good_sha256"]),
            other=_file_name(s["other"], name, "other"),
            other_rows=_count(s["other_rows"]),
            other_sha256=_sha(s["other_sha256"]),
        )
        if seg.first != first or not seg.lines or seg.good_rows + seg.other_rows > seg.lines:
            raise ValueError("segments that do not follow one another")
        first += seg.lines
        size += seg.bytes
        segments.append(seg)
    blocks = d.get("blocks")
    file = d.get("file")
    if not isinstance(blocks, list):
        raise ValueError("no block digests")
    if not (
        file is None
        or (isinstance(file, list) and len(file) == 5 and all(type(v) is int for v in file))
    ):
        raise ValueError("not a file's identity")
    snap = Snapshot(
        name,
        _count(d.get("bytes")),
        _sha(d.get("sha256")),
        _count(d.get("lines")),
        tuple(segments),
        tuple(_sha(b) for b in blocks),
        None if file is None else (file[0], file[1], file[2], file[3], file[4]),
    )
    if (snap.bytes, snap.lines) != (size, first) or snap.lines > snap.bytes:
        raise ValueError("segments that do not add up")
    if len(snap.blocks) != snap.bytes // _CHUNK:
        raise ValueError("block digests that do not cover the bytes")
    return snap


def open_snapshot(cache: Path, name: str) -> Snapshot | None:
    """The snapshot of record file ``name`` if its manifest and segment files hold (the
    record file itself is checked by the caller: ``digest_prefix``), else None."""
    try:
        snap = _parse(_read_regular(_manifest(cache, name), MAX_MANIFEST_BYTES), name)
        for seg in snap.segments:
            for file, digest in ((seg.good, seg.good_sha256), (seg.other, seg.other_sha256)):
                if hashlib.sha256(_read_regular(cache / file)).hexdigest() != digest:
                    raise ValueError(f"{file} does not match its hash")
    except (OSError, ValueError, KeyError, RecursionError):
        return None
    return snap


def good_parquet(cache: Path, snap: Snapshot) -> list[str]:
    return [str(cache / s.good) for s in snap.segments]


def other_lines(
    con: duckdb.DuckDBPyConnection, cache: Path, snap: Snapshot
) -> list[tuple[int, bytes]]:
    """The non-blank lines the engine did not accept, (n, bytes), in order; raises
    ValueError (or duckdb.Error) where the files disagree with the manifest."""
    out: list[tuple[int, bytes]] = []
    for seg in snap.segments:
        rows = con.execute(
            "SELECT n, line FROM read_parquet(?) ORDER BY n", [str(cache / seg.other)]
        ).fetchall()
        if len(rows) != seg.other_rows or any(
            type(n) is not int or not seg.first < n <= seg.first + seg.lines or type(b) is not bytes
            for n, b in rows
        ):
            raise ValueError(f"{seg.other} does not hold what its manifest says")
        out += rows
    return out


class BlockDigest:
    """The digest of a record file's bytes, as snapshots and the report's basis name them:
    the sha256 of the sha256s of its consecutive blocks of ``_CHUNK`` bytes (the last one
    shorter; no bytes: sha256 of nothing). Its blocks are hashed apart, so two threads hash
    a long file in half the time (``digest_prefix``), and more bytes can be added to a copy
    (``update``) as to hashlib's objects."""

    def __init__(self) -> None:
        self._blocks = hashlib.sha256()  # of the full blocks' digests
        self._full: list[bytes] = []  # those digests
        self._part = hashlib.sha256()  # of the bytes after them
        self._fill = 0  # how many bytes that is

    def add_block(self, digest: bytes) -> None:
        """Add a full block by its sha256 (only while no partial block is held)."""
        if self._fill:
            raise ValueError("a full block after a partial one")
        self._blocks.update(digest)
        self._full.append(digest)

    def blocks(self) -> tuple[str, ...]:
        """The sha256s of the full blocks so far (hex): with the bytes after them, what
        ``resume`` needs to go on from here without reading the blocks again."""
        return tuple(b.hex() for b in self._full)

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while len(view):
            take = min(len(view), _CHUNK - self._fill)
            self._part.update(view[:take])
            self._fill += take
            view = view[take:]
            if self._fill == _CHUNK:
                digest = self._part.digest()
                self._blocks.update(digest)
                self._full.append(digest)
                self._part, self._fill = hashlib.sha256(), 0

    def copy(self) -> BlockDigest:
        other = BlockDigest()
        other._blocks, other._part, other._fill = self._blocks.copy(), self._part.copy(), self._fill
        other._full = list(self._full)
        return other

    def hexdigest(self) -> str:
        h = self._blocks.copy()
        if self._fill:
            h.update(self._part.digest())
        return h.hexdigest()


def digest_bytes(data: bytes) -> str:
    """``BlockDigest``'s digest of ``data``."""
    d = BlockDigest()
    d.update(data)
    return d.hexdigest()


_HASHERS = max(1, min(2, os.cpu_count() or 1))


def digest_prefix(fd: int, size: int) -> BlockDigest | None:
    """The BlockDigest of the first ``size`` bytes of open file ``fd`` (None if it is
    shorter), its full blocks hashed by two threads (hashlib and reads release the GIL:
    this runs in a thread beside the engine)."""

    def block(k: int) -> bytes | None:
        data = os.pread(fd, _CHUNK, k * _CHUNK)
        return hashlib.sha256(data).digest() if len(data) == _CHUNK else None

    d = BlockDigest()
    full = size // _CHUNK
    with ThreadPoolExecutor(_HASHERS) as pool:
        for digest in pool.map(block, range(full)):
            if digest is None:
                return None
            d.add_block(digest)
    at = full * _CHUNK
    while at < size:
        chunk = os.pread(fd, size - at, at)
        if not chunk:
            return None
        d.update(chunk)
        at += len(chunk)
    return d


def resume(fd: int, snap: Snapshot) -> BlockDigest | None:
    """The BlockDigest of the bytes ``snap`` covers from its block digests and the bytes
    after its last full block (read from ``fd``: under 8 MiB), without reading the blocks;
    None where they do not give its digest (a manifest whose blocks do not add up, a file
    shorter than it covers). Only for a file the append note vouches for (appends.py)."""
    d = BlockDigest()
    for block in snap.blocks:
        d.add_block(bytes.fromhex(block))
    at = len(snap.blocks) * _CHUNK
    while at < snap.bytes:
        chunk = os.pread(fd, snap.bytes - at, at)
        if not chunk:
            return None
        d.update(chunk)
        at += len(chunk)
    return d if d.hexdigest() == snap.sha256 else None


def digest_lines(fd: int) -> tuple[BlockDigest, int, int, int, os.stat_result]:
    """For a whole file, read once from ``fd``: the BlockDigest of its bytes up to its last
    newline, how many bytes that is, how many it has, its newlines, and its status after
    the read."""
    h = BlockDigest()
    covered = at = newlines = 0
    rest = b""
    while True:
        chunk = os.pread(fd, _CHUNK, at)
        if not chunk:
            break
        at += len(chunk)
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            h.update(data[:cut])
            newlines += data.count(b"\n", 0, cut)
            covered += cut
            rest = data[cut:]
        else:
            rest = data
    return h, covered, at, newlines, os.fstat(fd)


def plan_segments(
    kept: Sequence[Segment], first: int, lines: int, good_rows: int, other_rows: int
) -> tuple[list[Segment], int, int]:
    """Which of ``kept`` stay as they are when lines ``first + 1`` to ``first + lines``
    (with ``good_rows`` accepted and ``other_rows`` others) join them: the new segment
    takes in every segment before it that is not larger than it (as a binary counter
    carries), so a file of N rows has O(log N) segments and a row is rewritten O(log N)
    times. Returns the segments kept and where the new one starts (its first line)."""
    keep = list(kept)
    size = good_rows + other_rows
    while keep and keep[-1].good_rows + keep[-1].other_rows <= size:
        last = keep.pop()
        size += last.good_rows + last.other_rows
        first = last.first
    return keep, first, size


def write_segment(
    con: duckdb.DuckDBPyConnection,
    cache: Path,
    name: str,
    good_sql: str,
    other: Sequence[tuple[int, bytes]],
    first: int,
    lines: int,
    size: int,
) -> Segment:
    """Write one segment: ``good_sql`` selects its accepted rows (n and the typed
    columns), ``other`` its other non-blank lines."""
    token = secrets.token_hex(16)
    good = f"{name}.{token}.good.parquet"
    other_name = f"{name}.{token}.other.parquet"
    con.execute(f"COPY ({good_sql}) TO {path_literal(cache / good)} (FORMAT parquet)")
    con.execute("CREATE OR REPLACE TEMP TABLE other_out (n BIGINT, line BLOB)")
    if other:
        con.execute(
            "INSERT INTO other_out SELECT unnest(?), unnest(?)",
            [[n for n, _ in other], [b for _, b in other]],
        )
    con.execute(f"COPY other_out TO {path_literal(cache / other_name)} (FORMAT parquet)")
    con.execute("DROP TABLE other_out")
    good_rows = con.execute("SELECT count(*) FROM read_parquet(?)", [str(cache / good)]).fetchone()
    return Segment(
        first=first,
        lines=lines,
        bytes=size,
        good=good,
        good_rows=good_rows[0] if good_rows else 0,
        good_sha256=hashlib.sha256(_read_regular(cache / good)).hexdigest(),
        other=other_name,
        other_rows=len(other),
        other_sha256=hashlib.sha256(_read_regular(cache / other_name)).hexdigest(),
    )


def save(cache: Path, snap: Snapshot) -> None:
    write_atomically(_manifest(cache, snap.name), snap.to_json())


def clean(cache: Path, names: Sequence[str]) -> None:
    """Remove what no manifest of the record files ``names`` refers to, once it is older
    than GRACE_S (younger files may be a concurrent report's, not yet named)."""
    keep = set()
    for name in names:
        keep.update((_manifest(cache, name).name, f"{name}.appends"))
        snap = open_snapshot(cache, name)
        if snap is not None:
            keep.update(x for s in snap.segments for x in (s.good, s.other))
    now = time.time()

    def unreferenced(entry: os.DirEntry[str]) -> bool:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            return False
        return entry.name not in keep and age > GRACE_S

    # relative to the folder opened without following a link: a link in it goes, never
    # what it points to, and a folder that became a link is not cleaned at all
    with contextlib.suppress(OSError):
        remove_files(cache, unreferenced)
