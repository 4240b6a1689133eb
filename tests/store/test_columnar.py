"""The store read by the engine (harness/store/columnar.py) gives what the store's own reader
gives: the same newest records, the same file:line warnings, the same lines kept out.

The property is checked on generated stores: several files of valid records, records with
a field replaced by something hostile or borderline (for the engine's predicate: Unicode,
escapes, control characters, long texts, numbers of every JSON type), older schemas,
duplicate keys, trailing commas, truncated and garbage lines, invalid UTF-8, and start
times that tie in several spellings.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.store import snapshot
from harness.store.columnar import RecordTable, load_latest
from harness.store.jsonl import LoadResult, Store, latest
from harness.store.records import SCHEMA
from harness.store.snapshot import cache_dir, digest_bytes, fingerprint

EXAMPLES = int(os.environ.get("COLUMNAR_EXAMPLES", "60"))

STAMPS = [
    "",
    "2026-11-30T01:02:03+00:00",
    "2026-11-30T01:02:03.000000+00:00",
    "2026-11-30T01:02:03.000+00:00",
    "2026-11-30T01:02:03.5+00:00",
    "2026-11-30T01:02:03.500000+00:00",
    "2026-11-30T02:02:03+01:00",
    "2026-11-30T01:02:03Z",
    "2026-11-30T01:02:04+00:00",
    "2026-11-30T01:02:03",
    "2026-02-30T01:02:03+00:00",
    "0999-01-01T00:00:00+00:00",
    "2026-11-30 01:02:03+00:00",
    "2026-11-30T24:00:00+00:00",
]
ODD_TEXT = st.sampled_from(
    [
        "é",
        "\u2028",
        "\x85",
        "\x7f",
        "\t",
        "\n",
        "\x00",
        "\ud800",
        "😀",
        "a b",
        "\\u0000",
        ",}",
        "'",
        "x" * 20_001,
        "y" * 1_001,
        "z" * 201,
        '"',
        "\\",
        "\r",
        "\b",
        "\f",
        "/",
        'a "quoted"\n\tline\\',
    ]
)
TEXT = st.one_of(
    st.sampled_from(["", "a", "RuntimeError", "line one\nline two"]),
    ODD_TEXT,
    st.text(max_size=6),
)
VALUE = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 4, 255, 256, 10_000, 10_001, 2**31, 2**32, 2**64, 1.0, 0.5, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(TEXT, max_size=2),
    st.dictionaries(TEXT, st.one_of(TEXT, st.booleans()), max_size=2),
)


@st.composite
def record(draw: st.DrawFn) -> dict[str, Any]:
    outcome = draw(st.sampled_from(["reproduced", "ok", "other_error", "unsupported"]))
    env = draw(
        st.sampled_from(["py3.11-torch2.4.1-lightning2.5.6", "py3.10-torch1.12.1-lightning2.1.4"])
    )
    d: dict[str, Any] = {
        "schema": SCHEMA,
        "entry": draw(st.sampled_from(["pytorch/a", "pytorch/b"])),
        "variant": draw(st.sampled_from(["baseline", "workaround-1"])),
        "kind": "baseline",
        "cell": env + "-cpu-fp32",
        "env": env,
        "device": "cpu",
        "precision": "fp32",
        "trial": draw(st.integers(0, 1)),
        "outcome": outcome,
        "reason": draw(TEXT) if outcome == "unsupported" else "",
        "exception": (
            {
                "type": "RuntimeError",
                "message": draw(TEXT),
                "frame": "repro.py:3 in run",
                "traceback": "Traceback\n",
            }
            if outcome in ("reproduced", "other_error")
            else None
        ),
        "checks": {"finite": {"ok": True, "detail": "loss 0.1"}, "_warnings": ["w"]},
        "duration_s": draw(st.sampled_from([0.5, 1, 1.0, 0.1, 2.675])),
        "exit_code": 0,
        "signal": None,
        "stdout_tail": "",
        "stderr_tail": "",
        "versions": {"python": "3.11.4", "torch": "2.4.1+cpu"},
        "provenance": {"host": "box", "os": "Linux"},
        "started_at": draw(st.sampled_from(STAMPS)),
        "machine": draw(st.sampled_from(["box", "other"])),
        "machine_id": draw(st.sampled_from(["0123456789ab", ""])),
        "imported_from": draw(st.sampled_from(["", "x.jsonl"])),
        "isolation": "fork",
        "run_s": draw(st.sampled_from([0.25, 0, 0.0])),
        "ran_in": draw(st.sampled_from(["", env + "-with-numpy-lt2"])),
        "requires": draw(st.sampled_from([{}, {"numpy": "numpy<2"}, {"numpy": "numpy>=1,<2"}])),
    }
    for _ in range(draw(st.integers(0, 2))):
        name = draw(
            st.sampled_from(
                [
                    *d,
                    "exception.type",
                    "checks.finite",
                    "checks._warnings",
                    "versions.torch",
                    "requires.numpy",
                ]
            )
        )
        value = draw(VALUE)
        if "." in name:  # a nested value
            outer, inner = name.split(".")
            if isinstance(d.get(outer), dict):
                d[outer] = {**d[outer], inner: value}
        else:
            d[name] = value
    if draw(st.integers(0, 3)) == 0:  # text in a check, as a warning or a detail
        d["checks"] = {
            "finite": {"ok": False, "detail": draw(TEXT)},
            "_warnings": draw(st.lists(TEXT, max_size=2)),
        }
    if draw(st.integers(0, 7)) == 0:
        d.pop(draw(st.sampled_from(sorted(d))))
    if draw(st.integers(0, 7)) == 0:
        d[draw(st.sampled_from(["extra", "schema"]))] = draw(VALUE)
    if draw(st.integers(0, 5)) == 0:  # an older schema: migrated by the store
        d["schema"] = draw(st.sampled_from([1, 2, 3, 4, 4]))
        if draw(st.integers(0, 3)):  # (schema 4 without the fields 5 added, mostly)
            d.pop("ran_in", None)
            d.pop("requires", None)
        if d["schema"] < 4:
            for name in ("machine", "machine_id", "imported_from"):
                d.pop(name, None)
        if d["schema"] == 1:
            d["status"] = d.pop("outcome", "ok")
    return d


@st.composite
def line(draw: st.DrawFn) -> bytes:
    text = json.dumps(draw(record()), allow_nan=True, ensure_ascii=draw(st.booleans()))
    how = draw(st.integers(0, 14))
    if how == 0:  # a duplicate key: Python keeps the last, the engine must not take it
        text = '{"trial": 7, ' + text[1:]
    elif how == 1:
        text = text[:-1] + ", }"  # a trailing comma (DuckDB's parser forgives it)
    elif how == 2:
        text = text[: draw(st.integers(0, len(text)))]  # cut short
    elif how == 3:
        text = text.replace(": ", ":").replace(", ", ",")  # compact
    elif how == 4:
        text = " " + text + "\r"
    elif how == 7:  # a duplicate key in a nested object
        text = text.replace('"python": ', '"python": "0", "python": ', 1)
        text = text.replace('"type": ', '"type": "X", "type": ', 1)
    elif how == 8:
        text = text.replace("}", ",\t}", 1)  # a trailing comma before a tab
    elif how == 9:
        text = text.replace('"ok": true', '"ok": true, "ok": false', 1)
    data = text.encode("utf-8", "surrogatepass")
    if how == 5:
        return draw(st.binary(max_size=30))
    if how == 6:
        return b""
    return data


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(st.lists(line(), max_size=10), min_size=1, max_size=3), st.booleans())
def test_the_engine_reads_a_store_as_the_store_does(files: list[list[bytes]], end: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        root.mkdir()
        for i, lines in enumerate(files):
            (root / f"m{i}.jsonl").write_bytes(b"\n".join(lines) + (b"\n" if end else b""))
        store = Store(root)
        loaded = store.load()
        got = load_latest(store)
        assert got.records() == latest(loaded.records)
        assert got.warnings == loaded.warnings
        assert got.refused == loaded.refused
        assert len(got) == len(got.records())


def test_the_engine_takes_ordinary_records_itself(tmp_path: Path) -> None:
    """Records as runs write them are read by the engine, not by Python (else the
    property above would hold because everything went the slow way)."""
    rnd = random.Random(0)
    root = tmp_path / "records"
    root.mkdir()
    lines = []
    for i in range(200):
        d = {
            "schema": SCHEMA,
            "entry": f"pytorch/e{i % 7}",
            "variant": "baseline",
            "kind": "baseline",
            "cell": "py3.11-torch2.4.1-lightning2.5.6-cpu-fp32",
            "env": "py3.11-torch2.4.1-lightning2.5.6",
            "device": "cpu",
            "precision": "fp32",
            "trial": i,
            "outcome": "reproduced",
            "reason": "",
            "exception": {
                "type": "RuntimeError",
                "message": "boom é",
                "frame": "f:1 in run",
                "traceback": "Traceback (most recent call last):\n  ...\n",
            },
            "checks": {
                "finite": {"ok": True, "detail": 'loss 0.5 "finite"'},
                "_warnings": ["w", "UserWarning: one\n\tand two\\"],
            },
            "duration_s": round(rnd.random() * 3, 3),
            "exit_code": 0,
            "signal": None,
            "stdout_tail": "",
            "stderr_tail": "",
            "versions": {"python": "3.11.4", "torch": "2.4.1+cpu"},
            "provenance": {"host": "box"},
            "started_at": f"2026-11-30T01:02:{i % 60:02d}+00:00",
            "machine": "box",
            "machine_id": "0123456789ab",
            "imported_from": "",
            "isolation": "fork",
            "run_s": 0.25,
        }
        lines.append(json.dumps(d))
    lines.append('{"schema": 4, "entry": "cut')
    (root / "box.jsonl").write_text("\n".join(lines) + "\n")
    got = load_latest(Store(root))
    assert got.python_lines == 1  # no line read by Python but the cut one
    assert len(got.warnings) == 1 and ":201: truncated line" in got.warnings[0]
    assert got.records() == latest(Store(root).load().records)


# --- snapshots (harness/store/snapshot.py): a load that starts from them gives a full read's
# result whatever happened to the record files or to the snapshots since

SNAPSHOT_EXAMPLES = int(os.environ.get("SNAPSHOT_EXAMPLES", "25"))
FILES = 3
CORRUPTIONS = ["garbage", "truncate", "delete", "flip", "swap", "link", "empty"]
OP = st.one_of(
    # lines appended (onto a last line without a newline, if there is one: it is completed)
    st.tuples(
        st.just("append"),
        st.integers(0, FILES - 1),
        st.lists(line(), min_size=1, max_size=4),
        st.booleans(),
    ),
    # a line written in two steps: its first bytes now, the rest with "complete"
    st.tuples(st.just("cut"), st.integers(0, FILES - 1), line(), st.integers(1, 40)),
    # lines appended by the store's writer, as runs and merges append (with the append
    # note that lets the next load trust the bytes before them unread: appends.py)
    st.tuples(
        st.just("store"), st.integers(0, FILES - 1), st.lists(line(), min_size=1, max_size=4)
    ),
    st.tuples(st.just("complete"), st.integers(0, FILES - 1)),
    # bytes of a file changed in place, or the file cut short
    st.tuples(
        st.just("edit"),
        st.integers(0, FILES - 1),
        st.floats(0, 1),
        st.binary(min_size=1, max_size=3),
    ),
    st.tuples(st.just("truncate"), st.integers(0, FILES - 1), st.floats(0, 1)),
    st.tuples(st.just("remove"), st.integers(0, FILES - 1)),
    # a snapshot file (manifest or segment) damaged
    st.tuples(st.just("corrupt"), st.integers(0, 50), st.sampled_from(CORRUPTIONS)),
)


def _same_as_a_full_read(
    store: Store, cache: Path, *, update: bool = True, full: LoadResult | None = None
) -> RecordTable:
    full = store.load() if full is None else full
    got = load_latest(store, cache, update=update)
    assert got.records() == latest(full.records)
    assert got.warnings == full.warnings
    assert got.refused == full.refused
    assert len(got) == len(got.records())
    return got


def _corrupt(cache: Path, k: int, how: str) -> None:
    files = sorted(p for p in cache.iterdir() if p.is_file()) if cache.is_dir() else []
    if not files:
        return
    target = files[k % len(files)]
    data = target.read_bytes()
    if how == "garbage":
        target.write_bytes(bytes(random.Random(k).randrange(256) for _ in range(64)))
    elif how == "truncate":
        target.write_bytes(data[: len(data) // 2])
    elif how == "delete":
        target.unlink()
    elif how == "flip" and data:
        at = len(data) // 2
        target.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    elif how == "swap":  # another snapshot file's bytes in its place
        target.write_bytes(files[(k + 1) % len(files)].read_bytes())
    elif how == "link":
        target.unlink()
        target.symlink_to(files[(k + 1) % len(files)])
    elif how == "empty":
        target.write_bytes(b"")


@settings(
    max_examples=SNAPSHOT_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(st.lists(line(), max_size=8), min_size=1, max_size=FILES),
    st.booleans(),
    st.lists(OP, max_size=5),
)
def test_a_load_from_snapshots_gives_a_full_reads_result(
    files: list[list[bytes]], end: bool, ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results" / "records"
        root.mkdir(parents=True)
        cache = cache_dir(root)
        for i, lines in enumerate(files):
            (root / f"m{i}.jsonl").write_bytes(b"\n".join(lines) + (b"\n" if end else b""))
        store = Store(root)
        full = store.load()
        covered = _same_as_a_full_read(store, cache, full=full).covered
        before = latest(full.records)
        pending: dict[int, bytes] = {}
        for op in ops:
            _apply(op, root, cache, pending)
            full = store.load()
            now = latest(full.records)
            _since_holds(store, cache, covered, full, now, before)
            covered = _same_as_a_full_read(store, cache, full=full).covered
            before = now
        _same_as_a_full_read(store, cache)  # nothing changed since the last load


def _since_holds(
    store: Store,
    cache: Path,
    covered: dict[str, tuple[int, str]],
    full: LoadResult,
    now: list[Any],
    before: list[Any],
) -> None:
    """A load since the last one's basis (writing nothing, so that the load after it sees
    what the op left) either reads in full (touched None: what a full read gives) or holds
    exactly the entries appended to, as a full read gives them, and every other entry's
    records are what the last full read gave them."""
    got = load_latest(store, cache, update=False, since=covered or None)
    assert got.warnings == full.warnings and got.refused == full.refused
    if got.touched is None:
        assert got.records() == now
    else:
        assert covered, "a load since no basis reads in full"
        assert got.records() == [r for r in now if r.entry in got.touched]
        kept = [r for r in now if r.entry not in got.touched]
        assert kept == [r for r in before if r.entry not in got.touched]


def _apply(op: tuple[Any, ...], root: Path, cache: Path, pending: dict[int, bytes]) -> None:
    path = root / f"m{op[1]}.jsonl"
    if op[0] == "append":
        with open(path, "ab") as f:
            f.write(b"\n".join(op[2]) + (b"\n" if op[3] else b""))
    elif op[0] == "store":
        Store(root)._append_bytes(b"".join(x + b"\n" for x in op[2]), path)
    elif op[0] == "cut":
        with open(path, "ab") as f:
            f.write(op[2][: op[3]])
        pending[op[1]] = op[2][op[3] :]
    elif op[0] == "complete":
        with open(path, "ab") as f:
            f.write(pending.pop(op[1], b"") + b"\n")
    elif op[0] == "edit" and path.exists() and path.stat().st_size:
        data = path.read_bytes()
        at = int(op[2] * (len(data) - 1))
        with open(path, "r+b") as f:  # in place, as an editor that keeps the file
            f.seek(at)
            f.write(op[3][: len(data) - at])
    elif op[0] == "truncate" and path.exists():
        os.truncate(path, int(op[2] * path.stat().st_size))
    elif op[0] == "remove":
        path.unlink(missing_ok=True)
    elif op[0] == "corrupt":
        _corrupt(cache, op[1], op[2])


def test_a_load_since_its_basis_reads_only_the_entries_appended_to(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    cache = cache_dir(root)
    path = root / "box.jsonl"
    path.write_text("".join(_ordinary(i) + "\n" for i in range(50)))
    store = Store(root)
    first = load_latest(store, cache)
    assert first.touched is None and first.covered == {
        "box.jsonl": (path.stat().st_size, digest_bytes(path.read_bytes()))
    }
    with open(path, "a") as f:  # a newer record of key 3 (entry e3), a new key of e1
        f.write(_ordinary(3, "2026-12-01T00:00:00+00:00") + "\n" + _ordinary(50) + "\n")
    later = load_latest(store, cache, since=first.covered)
    assert later.touched == {"pytorch/e3", "pytorch/e1"}
    full = latest(store.load().records)
    assert later.records() == [r for r in full if r.entry in later.touched]
    # a basis of other bytes (the file edited since, or another file): a full read
    again = load_latest(store, cache, since={"box.jsonl": (1, "0" * 64)})
    assert again.touched is None and again.records() == full
    (root / "other.jsonl").write_text(_ordinary(7) + "\n")
    assert load_latest(store, cache, since=later.covered).touched is None
    # an empty file is covered by nothing: every line written to it later is new
    (root / "other.jsonl").unlink()
    (root / "empty.jsonl").write_bytes(b"")
    basis = load_latest(store, cache).covered
    assert basis["empty.jsonl"] == (0, hashlib.sha256(b"").hexdigest())  # no blocks
    (root / "empty.jsonl").write_text(_ordinary(5) + "\n")
    assert load_latest(store, cache, since=basis).touched == {"pytorch/e5"}
    # a last line still being written: no basis (the next load reads in full)
    with open(path, "a") as f:
        f.write('{"sch')
    assert load_latest(store, cache).covered == {}


def _ordinary(i: int, started: str = "2026-11-30T01:02:03+00:00") -> str:
    return json.dumps(
        {
            "schema": SCHEMA,
            "entry": f"pytorch/e{i % 7}",
            "variant": "baseline",
            "kind": "baseline",
            "cell": "py3.11-torch2.4.1-lightning2.5.6-cpu-fp32",
            "env": "py3.11-torch2.4.1-lightning2.5.6",
            "device": "cpu",
            "precision": "fp32",
            "trial": i,
            "outcome": "ok",
            "reason": "",
            "exception": None,
            "checks": {},
            "duration_s": 0.5,
            "exit_code": 0,
            "signal": None,
            "stdout_tail": "",
            "stderr_tail": "",
            "versions": {"python": "3.11.4"},
            "provenance": {"host": "box"},
            "started_at": started,
            "machine": "box",
            "machine_id": "0123456789ab",
            "imported_from": "",
            "isolation": "fork",
            "run_s": 0.25,
        }
    )


def test_a_load_reads_only_the_lines_after_the_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    cache = cache_dir(root)
    path = root / "box.jsonl"
    # an old-schema line and a blank one: read by Python, from the snapshot too
    old = json.loads(_ordinary(99))
    old["schema"] = 3
    path.write_text("\n".join([*(_ordinary(i) for i in range(50)), json.dumps(old), ""]) + "\n")
    store = Store(root)
    first = _same_as_a_full_read(store, cache)
    assert first.snapshot_lines == 0 and first.python_lines == 1
    again = _same_as_a_full_read(store, cache)
    assert again.snapshot_lines == 52 and again.python_lines == 1
    # a newer record of key 3, a new key, and a line still being written
    with open(path, "a") as f:
        f.write(_ordinary(3, "2026-12-01T00:00:00+00:00") + "\n" + _ordinary(50) + "\n" + '{"sch')
    grown = _same_as_a_full_read(store, cache)
    assert grown.snapshot_lines == 52 and len(grown) == 52 and len(grown.warnings) == 1
    assert f"{path}:55: truncated last line" in grown.warnings[0]
    latest_again = _same_as_a_full_read(store, cache)
    assert latest_again.snapshot_lines == 54  # up to the last newline, never the cut line
    manifest = json.loads((cache / "box.jsonl.json").read_text())
    assert manifest["lines"] == 54 and manifest["bytes"] == path.read_bytes().rindex(b"\n") + 1


def test_report_check_writes_no_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text(_ordinary(1) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache, update=False)
    assert not cache.exists()
    _same_as_a_full_read(Store(root), cache)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir())
    with open(root / "box.jsonl", "a") as f:
        f.write(_ordinary(2) + "\n")
    assert _same_as_a_full_read(Store(root), cache, update=False).snapshot_lines == 1
    assert sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir()) == before


def test_a_snapshot_of_other_code_is_not_used(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text(_ordinary(1) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache)
    manifest = cache / "box.jsonl.json"
    d = json.loads(manifest.read_text())
    d["fingerprint"] = "0" * 64
    manifest.write_text(json.dumps(d))
    assert _same_as_a_full_read(Store(root), cache).snapshot_lines == 0  # read in full
    assert json.loads(manifest.read_text())["fingerprint"] == fingerprint()  # and renewed
    assert _same_as_a_full_read(Store(root), cache).snapshot_lines == 1


def test_snapshots_of_removed_files_are_cleaned_up(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    for name in ("a", "b"):
        (root / f"{name}.jsonl").write_text(_ordinary(1) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache)
    with open(root / "a.jsonl", "a") as f:
        f.write(_ordinary(2) + "\n")
    _same_as_a_full_read(Store(root), cache)  # a second segment of a.jsonl, merged in
    (root / "b.jsonl").rename(root / "c.jsonl")
    _same_as_a_full_read(Store(root), cache)
    names = {p.name.split(".")[0] for p in cache.iterdir()}
    assert names == {"a", "b", "c"}  # b's files are young: perhaps a concurrent report's
    monkeypatch.setattr(snapshot, "GRACE_S", -1.0)
    _same_as_a_full_read(Store(root), cache)
    kept = sorted(p.name for p in cache.iterdir())
    assert [n.split(".")[0] for n in kept] == ["a"] * 3 + ["c"] * 3, kept


def test_concurrent_loads_leave_usable_snapshots(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text("".join(_ordinary(i) + "\n" for i in range(300)))
    cache = cache_dir(root)
    store = Store(root)
    expected = latest(store.load().records)
    for round_ in range(3):
        with ThreadPoolExecutor(max_workers=3) as pool:
            tables = list(pool.map(lambda _: load_latest(store, cache), range(3)))
        assert all(t.records() == expected for t in tables)
        with open(root / "box.jsonl", "a") as f:
            f.write(_ordinary(300 + round_) + "\n")
        expected = latest(store.load().records)
    assert _same_as_a_full_read(store, cache).snapshot_lines > 300


def test_segments_merge_as_a_binary_counter_carries() -> None:
    segments: list[snapshot.Segment] = []
    first = 0
    for _ in range(1000):  # a large first segment, then one row a load
        rows = 100_000 if not segments else 1
        keep, start, size = snapshot.plan_segments(segments, first, rows, rows, 0)
        seg = snapshot.Segment(start, first + rows - start, 1, "g", size, "0", "o", 0, "0")
        segments = [*keep, seg]
        first += rows
        assert len(segments) <= 12
    assert segments[0].good_rows == 100_000 and sum(s.lines for s in segments) == first


def test_a_manifest_naming_files_outside_its_folder_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    record_file = root / "box.jsonl"
    record_file.write_text(_ordinary(1) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache)
    manifest = cache / "box.jsonl.json"
    d = json.loads(manifest.read_text())
    d["segments"][0]["good"] = "../../records/box.jsonl"
    manifest.write_text(json.dumps(d))
    before = record_file.read_bytes()
    assert _same_as_a_full_read(Store(root), cache).snapshot_lines == 0
    assert record_file.read_bytes() == before
    assert _same_as_a_full_read(Store(root), cache).snapshot_lines == 1  # renewed


def test_equal_records_of_one_run_are_taken_in_the_store_order(tmp_path: Path) -> None:
    """Two lines of one run that say the same (but for the file they were imported from):
    store.latest keeps the first; the engine's line comes first, Python reads the second
    (a duplicate key)."""
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    first = json.loads(_ordinary(1))
    first["imported_from"] = "y.jsonl"
    second = dict(first, imported_from="x.jsonl")
    (root / "box.jsonl").write_text(
        json.dumps(first) + "\n" + '{"trial": 1, ' + json.dumps(second)[1:] + "\n"
    )
    got = _same_as_a_full_read(Store(root), cache_dir(root))
    assert [r.imported_from for r in got.records()] == ["y.jsonl"]


def test_a_project_whose_path_holds_quotes_and_a_newline_reads_its_snapshots(
    tmp_path: Path,
) -> None:
    # the snapshots' Parquet files are named in a view (which takes no parameter) and in
    # COPY ... TO: their paths are written into the SQL, by harness/store/sql.path_literal
    root = tmp_path / "it's a \"project\"\n'; DROP TABLE records; --\\" / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text("\n".join(_ordinary(i) for i in range(20)) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache)
    assert any(p.name.endswith(".parquet") for p in cache.iterdir())
    again = _same_as_a_full_read(Store(root), cache)
    assert again.snapshot_lines == 20 and len(again) == 20


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_the_engine_skips_what_is_not_a_regular_file_as_the_store_does(tmp_path: Path) -> None:
    """A FIFO hung the engine's read_text, a folder or a dangling link raised (issue 25)."""
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text(_ordinary(1) + "\n")
    os.mkfifo(root / "fifo.jsonl")
    (root / "folder.jsonl").mkdir()
    (root / "dangling.jsonl").symlink_to(root / "nowhere")
    (root / "zero.jsonl").symlink_to("/dev/zero")
    for cache in (None, cache_dir(root), cache_dir(root)):  # no snapshot, a new one, from it
        got = _same_as_a_full_read(Store(root), cache) if cache else load_latest(Store(root))
        assert len(got) == 1 and len(got.warnings) == 4
        assert all("not a regular file" in w for w in got.warnings)


def test_a_line_too_long_for_the_engine_is_read_by_python_in_chunks(tmp_path: Path) -> None:
    """A file with a line over MAX_LINE_BYTES (one of 2 GiB made `report` read the file
    whole and hold 9 GB) is read by the store's chunked reader, with or without snapshot."""
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    path = root / "box.jsonl"
    path.write_text(_ordinary(1) + "\n")
    cache = cache_dir(root)
    _same_as_a_full_read(Store(root), cache)
    assert _same_as_a_full_read(Store(root), cache).snapshot_lines == 1
    with open(path, "ab") as f:  # after the snapshot: a 3 MiB line, then a record
        f.write(b"{" + b" " * (3 << 20) + b"}\n" + _ordinary(2).encode() + b"\n")
    got = _same_as_a_full_read(Store(root), cache)
    assert len(got) == 2 and got.snapshot_lines == 0
    (warning,) = got.warnings
    assert f"{path}:2: corrupt record kept out: line is {(3 << 20) + 2} bytes long" in warning
    got = _same_as_a_full_read(Store(root), None)
    assert len(got) == 2


@pytest.mark.parametrize("linked", ["snapshot", ".cache"])
def test_snapshots_are_never_read_written_or_cleaned_through_a_link(
    tmp_path: Path, monkeypatch: Any, linked: str
) -> None:
    """results/.cache/snapshot (or results/.cache) a link to another folder: clean unlinked
    files there, and the snapshots were written there (issue 25, item 2)."""
    root = tmp_path / "results" / "records"
    root.mkdir(parents=True)
    (root / "box.jsonl").write_text(_ordinary(1) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "box.jsonl.json").write_text("theirs")
    os.utime(elsewhere / "box.jsonl.json", (0, 0))
    cache = cache_dir(root)
    place = cache if linked == "snapshot" else cache.parent
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setattr(snapshot, "GRACE_S", -1.0)
    got = load_latest(Store(root), cache)
    assert len(got) == 1
    assert got.warnings == [
        f"{place}: is a link (to {elsewhere}); the harness writes and deletes nothing "
        "through a link; the snapshots are neither read nor written"
    ]
    assert [p.name for p in elsewhere.iterdir()] == ["box.jsonl.json"]
    assert (elsewhere / "box.jsonl.json").read_text() == "theirs"
    # a link inside a real cache folder is removed itself, never what it points to
    place.unlink()
    cache.mkdir(parents=True)
    (cache / "gone.jsonl.json").symlink_to(elsewhere / "box.jsonl.json")
    snapshot.clean(cache, ["box.jsonl"])
    assert not (cache / "gone.jsonl.json").is_symlink()
    assert (elsewhere / "box.jsonl.json").read_text() == "theirs"


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=80),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=4),
    size=st.integers(min_value=0, max_value=90),
)
def test_a_block_digest_is_the_sha256_of_its_blocks_sha256s_however_it_is_fed(
    tmp_path_factory, data, cuts, size
):
    """What snapshots and the basis name a record file's bytes by: its blocks hashed apart
    (here of 16 bytes), whether fed in pieces, copied and extended, or read by two threads
    from a file (digest_prefix: None where the file is shorter than asked)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshot, "_CHUNK", 16)
        blocks = [data[i : i + 16] for i in range(0, len(data), 16)]
        expected = hashlib.sha256(b"".join(hashlib.sha256(b).digest() for b in blocks))
        assert digest_bytes(data) == expected.hexdigest()
        d = snapshot.BlockDigest()
        at = 0
        for cut in sorted(cuts):
            d.update(data[at:cut])
            at = max(at, cut)
        before = d.copy()
        d.update(data[at:])
        assert d.hexdigest() == expected.hexdigest()
        assert before.hexdigest() == digest_bytes(data[:at])  # the copy is not moved
        path = tmp_path_factory.mktemp("digest") / "f"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            prefix = snapshot.digest_prefix(fd, size)
        finally:
            os.close(fd)
        if size > len(data):
            assert prefix is None
        else:
            assert prefix is not None and prefix.hexdigest() == digest_bytes(data[:size])
            prefix.update(data[size:])  # extended as a load extends it by the lines appended
            assert prefix.hexdigest() == expected.hexdigest()
