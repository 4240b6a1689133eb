"""The store's append notes (harness/store/appends.py): a load after the store's own appends
trusts the bytes its snapshot covers without reading them; any other change to the file, or
a note that does not vouch for it, and they are hashed again, and the load is a full read's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.store import appends, snapshot
from harness.store.columnar import load_latest
from harness.store.jsonl import Store, latest
from tests.store.test_columnar import _ordinary


def _project(tmp_path: Path) -> tuple[Store, Path, Path]:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    path = root / "box.jsonl"
    path.write_text("".join(_ordinary(i) + "\n" for i in range(40)))
    return Store(root), path, appends.cache_dir(root)


def _hashes(monkeypatch: Any) -> list[int]:
    """Count the loads' reads of a snapshot's bytes (snapshot.digest_prefix)."""
    calls: list[int] = []
    real = snapshot.digest_prefix

    def counted(fd: int, size: int) -> Any:
        calls.append(size)
        return real(fd, size)

    monkeypatch.setattr(snapshot, "digest_prefix", counted)
    return calls


def _as_a_full_read(store: Store, cache: Path, **kw: Any) -> Any:
    got = load_latest(store, cache, **kw)
    full = store.load()
    want = latest(full.records)
    if got.touched is not None:
        want = [r for r in want if r.entry in got.touched]
    assert got.records() == want
    assert got.warnings == full.warnings and got.refused == full.refused
    return got


def test_a_load_after_the_stores_appends_reads_none_of_the_bytes_before_them(
    tmp_path: Path, monkeypatch: Any
) -> None:
    store, path, cache = _project(tmp_path)
    first = load_latest(store, cache)
    manifest = json.loads((cache / "box.jsonl.json").read_text())
    assert manifest["file"] == list(appends.identity(os.stat(path)))
    # two appends, as two jobs of a run finish: one chain from the snapshot's file to now
    store._append_lines([_ordinary(3, "2026-12-01T00:00:00+00:00") + "\n"], path)
    store._append_lines([_ordinary(47) + "\n"], path)
    assert appends.read(cache, "box.jsonl") == (
        tuple(manifest["file"]),
        appends.identity(os.stat(path)),
    )
    calls = _hashes(monkeypatch)
    later = _as_a_full_read(store, cache, since=first.covered)
    assert later.touched == {"pytorch/e3", "pytorch/e5"}
    assert calls == []
    # the new snapshot covers the whole file, from the old one's blocks and the new bytes
    assert later.covered == {
        "box.jsonl": (path.stat().st_size, snapshot.digest_bytes(path.read_bytes()))
    }
    # the note ran from the old snapshot's file: it is dropped, and the next append starts
    # one from where the new snapshot read the file
    assert appends.read(cache, "box.jsonl") is None
    again = json.loads((cache / "box.jsonl.json").read_text())["file"]
    store._append_lines([_ordinary(48) + "\n"], path)
    assert appends.read(cache, "box.jsonl") == (tuple(again), appends.identity(os.stat(path)))
    _as_a_full_read(store, cache, since=later.covered)
    _as_a_full_read(store, cache)
    assert calls == []


def _edit_in_place(path: Path) -> None:
    """One byte changed where it changes a record (a trial's number), the file's length
    kept, its modification time moved on as any later write moves it (an edit within the
    same clock tick as the last append is not seen: as `make` and git's index, see
    appends.py)."""
    data = path.read_bytes()
    at = data.index(b'"trial": 1,')
    with open(path, "r+b") as f:
        f.seek(at + len(b'"trial": '))
        f.write(b"9")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


@pytest.mark.parametrize(
    "change",
    [
        "appended by another program",
        "edited in place",
        "edited in place, then appended by the store",
        "replaced by a copy of itself",
        "note damaged",
        "note from another file",
    ],
)
def test_a_file_changed_behind_the_stores_appends_is_hashed_again(
    tmp_path: Path, monkeypatch: Any, change: str
) -> None:
    store, path, cache = _project(tmp_path)
    first = load_latest(store, cache)
    store._append_lines([_ordinary(41) + "\n"], path)
    if change == "appended by another program":
        with open(path, "a") as f:
            f.write(_ordinary(42) + "\n")
    elif change.startswith("edited in place"):
        _edit_in_place(path)
        if change.endswith("by the store"):
            store._append_lines([_ordinary(43) + "\n"], path)
    elif change == "replaced by a copy of itself":
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data)
    elif change == "note damaged":
        (cache / "box.jsonl.appends").write_text('{"format": 1, "from": [1, 2')
    elif change == "note from another file":
        other = store.root / "other.jsonl"
        store._append_lines([_ordinary(44) + "\n"], other)
        (cache / "other.jsonl.appends").replace(cache / "box.jsonl.appends")
        other.unlink()
    calls = _hashes(monkeypatch)
    later = _as_a_full_read(store, cache, since=first.covered)
    assert calls, "the bytes the snapshot covers were trusted unread"
    if change.startswith("edited in place"):
        assert later.touched is None  # the file no longer starts with them: a full read
        assert any(r.trial == 9 and r.entry == "pytorch/e1" for r in later.records())


def test_a_note_is_written_only_into_a_snapshot_folder_a_report_made(tmp_path: Path) -> None:
    store, path, cache = _project(tmp_path)
    store._append_lines([_ordinary(41) + "\n"], path)
    assert not cache.parent.exists()  # no report yet: nothing made beside the store
    # the snapshot folder a link to elsewhere: nothing written through it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.parent.mkdir()
    cache.symlink_to(elsewhere, target_is_directory=True)
    store._append_lines([_ordinary(42) + "\n"], path)
    assert list(elsewhere.iterdir()) == []
    assert len(store.load().records) == 42  # the appends themselves went through


def test_a_note_survives_the_snapshots_clean_up_while_its_file_is_there(
    tmp_path: Path, monkeypatch: Any
) -> None:
    store, path, cache = _project(tmp_path)
    load_latest(store, cache)
    store._append_lines([_ordinary(41) + "\n"], path)
    monkeypatch.setattr(snapshot, "GRACE_S", -1.0)
    snapshot.clean(cache, ["box.jsonl"])
    assert (cache / "box.jsonl.appends").is_file()
    snapshot.clean(cache, [])  # its record file gone: the note goes with the snapshot
    assert not (cache / "box.jsonl.appends").exists()
