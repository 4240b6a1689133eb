"""The append-only store: resume, truncation, corruption, migration, concurrency, disk full,
record identity across machines, merge."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import multiprocessing
import multiprocessing.synchronize
import os
import shutil
import signal
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.provenance import MACHINE_ID_FILE, machine_id
from harness.outcomes import Outcome
from harness.store.columnar import load_latest
from harness.store.jsonl import (
    HEAD_BYTES,
    MAX_LINE_BYTES,
    Store,
    StoreError,
    has_long_line,
    iter_lines,
    latest,
    migrate,
)
from harness.store.records import SCHEMA, ExceptionInfo, MachineKey, Record
from tests.paths import RESOURCES

RESOURCES = RESOURCES / "records"


def rec(variant: str = "baseline", trial: int = 0, outcome: Outcome = Outcome.OK, **kw) -> Record:
    return Record(
        entry="e/x",
        variant=variant,
        kind="baseline",
        cell="c-cpu-fp32",
        env="c",
        device="cpu",
        precision="fp32",
        trial=trial,
        outcome=outcome,
        **kw,
    )


def test_append_load_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    r = rec(
        exception=ExceptionInfo("RuntimeError", "msg | `x` <b>", "f.py:1 in g"),
        checks={"moved": {"ok": True, "detail": "d"}},
    )
    store.append(r)
    store.append(rec(trial=1, outcome=Outcome.REPRODUCED))
    loaded = store.load()
    assert loaded.warnings == []
    # the store stamps the machine that ran it: the name and this results folder's id
    assert loaded.records[0] == dataclasses.replace(r, machine="box", machine_id=store.machine.id)
    assert len(store.machine.id) == 12 and loaded.records[1].machine_key == store.machine
    assert [x.trial for x in loaded.records] == [0, 1]
    assert (tmp_path / "box.jsonl").read_text().count("\n") == 2


def test_resume_keys_are_this_machines_own(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    store.append(rec(trial=0))
    assert store.done_keys() == {rec(trial=0).key}
    # another machine's records in the same folder are not done here: a merged CI file
    # must not make --resume skip what this machine has not run
    Store(tmp_path, machine="ci-cpu-1").append(rec(trial=1))
    assert store.done_keys() == {rec(trial=0).key}
    # nor a machine of the same name with another id (a clone with the same host name)
    twin = dataclasses.replace(rec(trial=2), machine="box", machine_id="0123456789ab")
    (tmp_path / "twin.jsonl").write_text(json.dumps(twin.to_dict()) + "\n")
    assert store.done_keys() == {rec(trial=0).key}


def test_truncated_last_line_warns_and_keeps_every_complete_record(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    store.append(rec(trial=0))
    store.append(rec(trial=1))
    text = store.path.read_text()
    store.path.write_text(text + text.splitlines()[0][:57])  # a crash mid-write
    loaded = store.load()
    assert [r.trial for r in loaded.records] == [0, 1]
    (warning,) = loaded.warnings
    assert f"{store.path}:3: truncated last line" in warning
    # the next append starts on a fresh line: the torn line stays alone, ours is intact
    store.append(rec(trial=2))
    again = store.load()
    assert [r.trial for r in again.records] == [0, 1, 2]
    # and it is still named for what it is, not as corruption
    assert again.warnings and f"{store.path}:3: truncated line kept out" in again.warnings[0]


def test_corrupt_middle_line_is_named_with_file_and_line(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    store.append(rec(trial=0))
    with open(store.path, "a") as f:
        f.write("{not json\n")
    store.append(rec(trial=1))
    loaded = store.load()
    assert [r.trial for r in loaded.records] == [0, 1]
    assert loaded.warnings == [
        f"{store.path}:2: corrupt record kept out: " + loaded.warnings[0].split("kept out: ")[1]
    ]


def test_old_schema_is_migrated_from_a_kept_fixture(tmp_path: Path) -> None:
    shutil.copy(RESOURCES / "schema1.jsonl", tmp_path / "old-box.jsonl")
    loaded = Store(tmp_path).load()
    assert loaded.warnings == []
    first, second = loaded.records
    assert (
        first.schema == SCHEMA and first.outcome is Outcome.OK and first.stderr_tail == "old output"
    )
    assert first.kind == "baseline" and second.kind == "dead_end"
    # 1 -> 2 -> 3 -> 4: the machine is the file's name, its id was never recorded
    assert first.machine_key == second.machine_key == MachineKey("old-box", "")


@pytest.mark.parametrize("fixture", ["schema2.jsonl", "schema3.jsonl"])
def test_records_before_schema4_belong_to_the_machine_their_file_is_named_for(
    tmp_path: Path, fixture: str
) -> None:
    # files were named by --machine (or the host): that name is the machine, even where
    # the host in the provenance says otherwise (a CI runner's host name)
    shutil.copy(RESOURCES / fixture, tmp_path / "ci-cpu-3.jsonl")
    loaded = Store(tmp_path).load()
    assert loaded.warnings == [] and len(loaded.records) == 2
    for r in loaded.records:
        assert r.schema == SCHEMA and r.machine_key == MachineKey("ci-cpu-3", "")
        assert r.provenance["host"] == "vm" and r.imported_from == ""
    if fixture == "schema3.jsonl":
        assert loaded.records[1].outcome is Outcome.RELATED
    first = json.loads((RESOURCES / fixture).read_text().splitlines()[0])
    assert migrate(first)["machine"] == "vm"  # no file to go by: the host


def test_schema4_records_ran_in_their_cells_own_environment(tmp_path: Path) -> None:
    # schema 5 added where a variant with requirements (version advice) ran: before it,
    # every record ran in the environment of the cell it answers for
    shutil.copy(RESOURCES / "schema4.jsonl", tmp_path / "vm.jsonl")
    loaded = Store(tmp_path).load()
    assert loaded.warnings == [] and len(loaded.records) == 2
    for r in loaded.records:
        assert r.schema == SCHEMA and (r.ran_in, r.requires) == ("", {})
        assert r.machine_key == MachineKey("vm", "8d0f4c1e2a3b") and r.isolation == "fork"


def test_newer_schema_is_refused_with_a_reason(tmp_path: Path) -> None:
    d = rec().to_dict()
    d["schema"] = SCHEMA + 1
    (tmp_path / "new.jsonl").write_text(json.dumps(d) + "\n")
    loaded = Store(tmp_path).load()
    assert loaded.records == []
    assert "newer than this harness understands" in loaded.warnings[0]
    with pytest.raises(ValueError):
        migrate({"no": "schema"})


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (0, "schema: 0 is not"),
        (-1, "schema: -1 is not"),
        (False, "schema: False"),
        (True, "schema: True"),
        ("5", "schema: '5'"),
        (None, "schema: None"),
    ],
)
def test_a_schema_that_names_no_schema_is_said_so(tmp_path: Path, schema, said) -> None:
    """Issue 36, item 10: "schema" 0, -1 or false were kept out as a bare KeyError ("corrupt
    record kept out: 0"), and true was read as schema 1."""
    d = rec().to_dict()
    d["schema"] = schema
    (tmp_path / "odd.jsonl").write_text(json.dumps(d) + "\n")
    loaded = Store(tmp_path).load()
    assert loaded.records == []
    [warning] = loaded.warnings
    assert said in warning and "is not a record schema" in warning, warning


def _writer(root: str, name: str, n: int) -> None:
    store = Store(root, machine="shared")
    for i in range(n):
        store.append(rec(variant=name, trial=i, reason="x" * 5000))


def test_two_processes_appending_at_once_lose_and_interleave_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), f"w{k}", 200)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    loaded = Store(tmp_path).load()
    assert loaded.warnings == []
    assert len(loaded.records) == 400
    assert len({r.key for r in loaded.records}) == 400


def test_disk_full_is_a_clear_error_and_the_store_stays_valid(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    store.append(rec(trial=0))
    full = Store(tmp_path, machine="full")
    # every write to /dev/full fails with ENOSPC, for real; the store never writes through a
    # link, so the device is its record file itself here, not a link to it
    with pytest.raises(StoreError, match="disk full"):
        full._append_lines(["{}\n"], Path("/dev/full"))
    assert [r.trial for r in store.load().records] == [0]


def test_merge_adds_other_machines_once_and_says_where_each_came_from(tmp_path: Path) -> None:
    gpu = Store(tmp_path / "gpu", machine="gpu-box")
    gpu.append(rec(variant="cuda-one", started_at="2026-11-29T10:00:00+00:00"))
    main = Store(tmp_path / "main", machine="cpu-box")
    main.append(rec())
    first = main.merge([tmp_path / "gpu"])
    again = main.merge([gpu.path])
    assert (first.added, again.added, again.duplicates, again.conflicts) == (1, 0, 1, 0)
    records = main.load().records
    assert sorted(r.variant for r in records) == ["baseline", "cuda-one"]
    assert (tmp_path / "main" / "gpu-box.jsonl").is_file()
    (imported,) = [r for r in records if r.variant == "cuda-one"]
    assert imported.imported_from == "gpu-box.jsonl"
    assert imported.machine_key == gpu.machine and gpu.machine != main.machine
    # merged onwards from the merged store, the first file stays named
    third = Store(tmp_path / "third", machine="laptop")
    assert third.merge([tmp_path / "main"]).added == 2
    assert {r.imported_from for r in third.load().records} == {"gpu-box.jsonl", "cpu-box.jsonl"}


def test_a_conflicting_reimport_is_flagged_and_kept_out(tmp_path: Path) -> None:
    gpu = Store(tmp_path / "gpu", machine="gpu-box")
    gpu.append(rec(started_at="2026-11-29T10:00:00+00:00"))
    main = Store(tmp_path / "main", machine="cpu-box")
    assert main.merge([gpu.path]).added == 1
    # the same run (key, machine, start), edited: another outcome and reason
    d = json.loads(gpu.path.read_text())
    d.update(outcome="reproduced", reason="edited")
    edited = tmp_path / "edited" / "gpu-box.jsonl"
    edited.parent.mkdir()
    edited.write_text(json.dumps(d) + "\n")
    result = main.merge([edited])
    assert (result.added, result.duplicates, result.conflicts) == (0, 0, 1)
    (warning,) = result.warnings
    assert warning.startswith(f"{edited}:1: conflicts with the stored record of the same run")
    assert "outcome, reason differ" in warning and "gpu-box (" in warning
    assert [r.outcome for r in main.load().records if r.machine == "gpu-box"] == [Outcome.OK]


def _merger(root: str, source: str, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait(30)  # all at once: each has loaded its modules and waits for the others
    Store(root, machine="main").merge([source])


def test_the_same_file_merged_twice_at_once_never_doubles_the_store(tmp_path: Path) -> None:
    ci = Store(tmp_path / "ci", machine="ci-cpu-1")
    ci.append(rec(variant="v0", reason="x" * 2000, started_at="2026-11-29T10:00:00+00:00"))
    line = ci.path.read_text()
    ci.path.write_text("".join(line.replace('"v0"', f'"v{i}"') for i in range(800)))
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    procs = [
        ctx.Process(target=_merger, args=(str(tmp_path / "main"), str(ci.path), start))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    loaded = Store(tmp_path / "main").load()
    assert loaded.warnings == []
    assert len(loaded.records) == 800 and len({r.key for r in loaded.records}) == 800


def test_latest_keeps_the_newest_record_per_key_and_machine_by_time() -> None:
    a = MachineKey("box", "aaaaaaaaaaaa")

    def at(t: str, outcome: Outcome, m: MachineKey = a, trial: int = 0) -> Record:
        return rec(
            outcome=outcome,
            trial=trial,
            started_at=f"2026-11-29T{t}+00:00",
            machine=m.name,
            machine_id=m.id,
        )

    newer = at("12:00:00", Outcome.REPRODUCED)
    older = at("11:00:00", Outcome.OK)
    # the order the records arrive in plays no part, only their start time
    for rs in ([older, newer], [newer, older]):
        assert latest([*rs, at("09:00:00", Outcome.OK, trial=1)])[0] is newer
    # a time with another offset is compared as a time (13:30+02:00 is 11:30 UTC)
    east = rec(
        outcome=Outcome.CRASHED,
        started_at="2026-11-29T13:30:00+02:00",
        machine="box",
        machine_id=a.id,
    )
    assert latest([east, newer]) == [newer]
    # a tie in start time gives the same winner whatever the order
    tie = at("12:00:00", Outcome.TIMEOUT)
    assert latest([tie, newer]) == latest([newer, tie])


def _two_machines_same_key(first: str, second: str, tmp_path: Path) -> list[Record]:
    root = tmp_path / f"{first}-{second}"
    Store(root, machine=first).append(
        rec(outcome=Outcome.OK, started_at="2026-11-29T10:00:00+00:00")
    )
    Store(root, machine=second).append(
        rec(outcome=Outcome.REPRODUCED, started_at="2026-11-29T09:00:00+00:00")
    )
    return latest(Store(root).load().records)


def test_the_same_key_from_two_machines_is_kept_twice_in_both_name_orders(tmp_path: Path) -> None:
    # "a-box" sorts before "z-box" and the other way round: both records stay, each with
    # its machine, whichever file is read last and whichever is newer
    for first, second in (("a-box", "z-box"), ("z-box", "a-box")):
        kept = _two_machines_same_key(first, second, tmp_path)
        assert len(kept) == 2 and len({r.key for r in kept}) == 1
        assert {(r.machine, r.outcome) for r in kept} == {
            (first, Outcome.OK),
            (second, Outcome.REPRODUCED),
        }
        assert kept[0].machine_id and kept[0].machine_id == kept[1].machine_id  # one folder


def test_one_machine_in_two_files_newest_wins_in_both_name_orders(tmp_path: Path) -> None:
    m = MachineKey("box", "b0b0b0b0b0b0")
    old = rec(
        outcome=Outcome.OK, started_at="2026-11-29T08:00:00+00:00", machine=m.name, machine_id=m.id
    )
    new = dataclasses.replace(
        old, outcome=Outcome.REPRODUCED, started_at="2026-11-29T09:00:00+00:00"
    )
    for names in (("a.jsonl", "b.jsonl"), ("b.jsonl", "a.jsonl")):
        root = tmp_path / names[0]
        root.mkdir()
        (root / names[0]).write_text(json.dumps(new.to_dict()) + "\n")
        (root / names[1]).write_text(json.dumps(old.to_dict()) + "\n")
        assert [r.outcome for r in latest(Store(root).load().records)] == [Outcome.REPRODUCED]


def test_machine_ids_tell_apart_clones_and_shared_folders(tmp_path: Path) -> None:
    system = tmp_path / "etc-machine-id"
    system.write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    one, two = tmp_path / "one", tmp_path / "two"
    # stable for one results folder, and the raw system id is not published
    assert machine_id(one, system) == machine_id(one, system)
    assert "3d1219c7" not in machine_id(one, system)
    # two clones of one image: same /etc/machine-id, same host name, other results folders
    assert machine_id(one, system) != machine_id(two, system)
    # one results folder seen from two machines (a network mount): other system ids
    other = tmp_path / "other-machine-id"
    other.write_text("77aa\n")
    assert machine_id(one, system) != machine_id(one, other)
    # no /etc/machine-id at all (macOS, some containers): the folder's own id still works
    assert machine_id(one, tmp_path / "absent") == machine_id(one, tmp_path / "absent")
    assert (one / MACHINE_ID_FILE).read_text().strip()


# --- issue 25: only regular files are records, every read bounded, a line being written --


def _odd_record_files(root: Path) -> dict[Path, str]:
    """A FIFO, a folder, a dangling link and a link to /dev/zero, each named *.jsonl."""
    os.mkfifo(root / "fifo.jsonl")
    (root / "folder.jsonl").mkdir()
    (root / "dangling.jsonl").symlink_to(root / "nowhere")
    (root / "zero.jsonl").symlink_to("/dev/zero")
    return {
        root / "fifo.jsonl": "a FIFO",
        root / "folder.jsonl": "a folder",
        root / "dangling.jsonl": "a dangling link",
        root / "zero.jsonl": "a character device",
    }


def _skipped(odd: dict[Path, str]) -> list[str]:
    return [f"{path}: not a regular file ({kind}); skipped" for path, kind in sorted(odd.items())]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_only_regular_files_are_loaded_merged_and_resumed_from(tmp_path: Path) -> None:
    """A FIFO hung every reader, a folder raised IsADirectoryError, a dangling link
    FileNotFoundError, a link to /dev/zero never ended (issue 25, items 4 and 5)."""
    root = tmp_path / "records"
    store = Store(root, machine="box")
    store.append(rec())
    odd = _odd_record_files(root)
    with _deadline(30):
        loaded = store.load()
        assert [r.variant for r in loaded.records] == ["baseline"]
        assert loaded.warnings == _skipped(odd)
        assert store.done_keys() == {rec().key}
        other = tmp_path / "other"
        other.mkdir()
        theirs = _odd_record_files(other)
        Store(other, machine="theirs").append(rec(trial=1))
        merged = store.merge([other, other / "fifo.jsonl", other / "zero.jsonl"])
    assert merged.added == 1
    assert merged.warnings == [
        *_skipped(theirs),
        f"{other / 'fifo.jsonl'}: not a regular file (a FIFO); skipped",
        f"{other / 'zero.jsonl'}: not a regular file (a character device); skipped",
    ]


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened for reading waits for a writer)."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_line_longer_than_allowed_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A record file of one 64 MiB line without a newline (sparse: no disk) was read whole
    and split (2 GiB: 9 GB of memory, issue 25, item 6); it is read in chunks, named, and
    only its head is kept."""
    store = Store(tmp_path, machine="box")
    store.append(rec())
    with open(tmp_path / "huge.jsonl", "wb") as f:
        f.write(b'{"schema": 4, "entry": "')
        f.truncate(64 << 20)
    tracemalloc.start()
    try:
        loaded = store.load()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MiB held at once"
    assert [r.variant for r in loaded.records] == ["baseline"]
    (warning,) = loaded.warnings
    assert warning.startswith(f"{tmp_path / 'huge.jsonl'}:1: truncated last line kept out")
    assert f"line is {64 << 20} bytes long (at most {MAX_LINE_BYTES})" in warning
    (refused,) = loaded.refused
    assert refused.raw.startswith(b'{"schema": 4') and len(refused.raw) == HEAD_BYTES


def test_chunked_lines_are_the_lines_split_gives() -> None:
    """iter_lines over chunk edges, a line longer than the limit in the middle."""
    data = b"a\n\nbcd\n" + b"x" * 50 + b"\nlast"
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        got = list(iter_lines(f.fileno(), limit=20, chunk=3))
        assert has_long_line(f.fileno(), limit=20)
        assert not has_long_line(f.fileno(), limit=50)
        assert not has_long_line(f.fileno(), end=7, limit=3)
    assert got == [
        (b"a", 1, True),
        (b"", 0, True),
        (b"bcd", 3, True),
        (b"x" * 50, 50, True),  # longer than 20: its first HEAD_BYTES (all 50 here)
        (b"last", 4, False),
    ]


def test_a_line_being_written_is_not_called_truncated(tmp_path: Path) -> None:
    """A load beside a `merge` of a large file warned "truncated last line kept out (a run
    was interrupted mid-write)" about the line being written (issue 25, item 11): while a
    writer holds the file's lock, or after the file grew, that line is not yet a record."""
    store = Store(tmp_path, machine="box")
    store.append(rec())
    path = tmp_path / "box.jsonl"
    half = json.dumps(dataclasses.replace(rec(trial=1), machine="box").to_dict())[:40]
    with open(path, "ab") as f:
        f.write(half.encode())
    with open(path, "rb") as writer:  # a writer mid-line, as Store._append_lines holds it
        fcntl.flock(writer.fileno(), fcntl.LOCK_EX)
        held = store.load()
        engine = load_latest(store)
    assert held.warnings == [] and held.refused == []
    assert engine.warnings == [] and engine.refused == []
    assert len(held.records) == len(engine) == 1
    cut = store.load()  # nobody writes it: a crash cut it
    assert [w.split(": ", 1)[1][:24] for w in cut.warnings] == ["truncated last line kept"]
    assert load_latest(store).warnings == cut.warnings


def test_a_record_file_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    """Issue 36, item 8: run appended to a record file linked to a file outside the project."""
    from harness.store.jsonl import StoreError

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    root = tmp_path / "records"
    store = Store(root, machine="box")
    root.mkdir()
    store.path.symlink_to(outside)
    with pytest.raises(StoreError, match="is a link"):
        store.append(rec())
    assert outside.read_text() == "keep me\n"
