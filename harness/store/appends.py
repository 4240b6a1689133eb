"""Append notes: how a report learns that a record file only grew by the store's own appends
since its snapshot read it, without reading the file's first bytes again.

A snapshot is used only while its record file still starts with the bytes it covers, and
checking that means hashing them: 1.2 GB at a million records, the largest part of a report
that reads ten entries' new lines. The store's writer (``Store._append_lines``: every run
and every merge) knows better. Under the record file's lock it notes each append in
``results/.cache/snapshot/<file name>.appends``: the file's identity (size, modification and
change times in nanoseconds, inode, device) before the first append of an unbroken chain
and after its last. An append that starts where the note ends extends the note; any other
(the file changed in between: edited, cut, replaced, appended to by another program)
starts a new one from where it found the file.

A snapshot keeps the identity of the file it read (``Snapshot.file``). The next load trusts
its bytes without hashing them when the file is still exactly that, or when the note runs
from that identity to the file's identity now: only the store's appends happened in
between. This is the test the report's state makes of every file (harness/report/uptodate.py,
`make`, git's index): a program that rewrites the file changes its change time, which no
program can set back. Anything else, and the bytes are hashed as before.

A note is only a cache: it is written only into a snapshot folder a report made (a real
folder inside results/, never through a link), never makes an append fail, and a note
that is missing, damaged or stale only means the bytes are hashed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from harness.atomic import write_atomically
from harness.paths import OutsideProject, safe_folder

__all__ = ["Identity", "cache_dir", "forget_unless_from", "identity", "note", "only_appended"]

Identity = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device
_FORMAT = 1
_MAX_BYTES = 4096


def cache_dir(records_dir: Path) -> Path:
    """results/.cache/snapshot beside results/records (never inside it: the store reads
    every *.jsonl there)."""
    return records_dir.parent / ".cache" / "snapshot"


def identity(st: os.stat_result) -> Identity:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _path(cache: Path, name: str) -> Path:
    return cache / f"{name}.appends"


def _identity(value: object) -> Identity | None:
    if isinstance(value, list) and len(value) == 5 and all(type(v) is int for v in value):
        return (value[0], value[1], value[2], value[3], value[4])
    return None


def read(cache: Path, name: str) -> tuple[Identity, Identity] | None:
    """The note of record file ``name``: (identity before its chain, identity after), or
    None (none, or not one: a link, too long, not this format)."""
    try:
        fd = os.open(_path(cache, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:
        return None
    try:
        d = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(d, dict) or d.get("format") != _FORMAT:
        return None
    start, end = _identity(d.get("from")), _identity(d.get("to"))
    return None if start is None or end is None else (start, end)


def note(records_dir: Path, name: str, before: os.stat_result, after: os.stat_result) -> None:
    """Note that record file ``name`` of ``records_dir`` went from ``before`` to ``after`` by
    an append of the store (called under the file's lock). Written only where a report made
    the snapshot folder; a note that cannot be written is simply not there."""
    cache = cache_dir(records_dir)
    try:
        safe_folder(cache.parent.parent, cache)
        if not stat.S_ISDIR(os.lstat(cache).st_mode):
            return
    except (OutsideProject, OSError):
        return
    held = read(cache, name)
    start = held[0] if held is not None and held[1] == identity(before) else identity(before)
    data = {"format": _FORMAT, "from": list(start), "to": list(identity(after))}
    with contextlib.suppress(OSError):
        write_atomically(_path(cache, name), json.dumps(data).encode())


def only_appended(cache: Path, name: str, since: Identity | None, now: os.stat_result) -> bool:
    """Whether record file ``name``, whose snapshot read it at identity ``since``, is now
    (``now``) that file or that file after the store's appends alone."""
    if since is None:
        return False
    if identity(now) == since:
        return True
    return read(cache, name) == (since, identity(now))


def forget_unless_from(cache: Path, name: str, since: Identity | None) -> None:
    """After a snapshot that read the file at ``since``: drop a note that starts elsewhere
    (its chain passed through ``since``, so it can no longer vouch for the new snapshot;
    without it the next append starts a note from where it finds the file). Dropping a note
    only ever costs a hash, so this needs no lock."""
    held = read(cache, name)
    if held is not None and held[0] != since:
        with contextlib.suppress(OSError):
            os.unlink(_path(cache, name))
