"""The append-only store: resume, truncation, corruption, migration, concurrency, disk full."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from harness.outcomes import Outcome
from harness.records import SCHEMA, ExceptionInfo, Record
from harness.store import Store, StoreError, latest, migrate

RESOURCES = Path(__file__).parent / "resources" / "records"


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
    assert loaded.records[0] == r
    assert [x.trial for x in loaded.records] == [0, 1]
    assert (tmp_path / "box.jsonl").read_text().count("\n") == 2


def test_resume_keys(tmp_path: Path) -> None:
    store = Store(tmp_path, machine="box")
    store.append(rec(trial=0))
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


def test_newer_schema_is_refused_with_a_reason(tmp_path: Path) -> None:
    d = rec().to_dict()
    d["schema"] = SCHEMA + 1
    (tmp_path / "new.jsonl").write_text(json.dumps(d) + "\n")
    loaded = Store(tmp_path).load()
    assert loaded.records == []
    assert "newer than this harness understands" in loaded.warnings[0]
    with pytest.raises(ValueError):
        migrate({"no": "schema"})


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
    full.path.symlink_to("/dev/full")  # every write: ENOSPC, for real
    with pytest.raises(StoreError, match="disk full"):
        full.append(rec(trial=1))
    full.path.unlink()
    assert [r.trial for r in store.load().records] == [0]


def test_merge_adds_other_machines_once(tmp_path: Path) -> None:
    gpu = Store(tmp_path / "gpu", machine="gpu-box")
    gpu.append(rec(variant="cuda-one"))
    main = Store(tmp_path / "main", machine="cpu-box")
    main.append(rec())
    first = main.merge([tmp_path / "gpu"])
    again = main.merge([gpu.path])
    assert (first.added, again.added, again.duplicates) == (1, 0, 1)
    assert sorted(r.variant for r in main.load().records) == ["baseline", "cuda-one"]
    assert (tmp_path / "main" / "gpu-box.jsonl").is_file()


def test_latest_keeps_the_last_record_per_key() -> None:
    rs = [rec(outcome=Outcome.OK), rec(outcome=Outcome.REPRODUCED), rec(trial=1)]
    assert [r.outcome for r in latest(rs)] == [Outcome.REPRODUCED, Outcome.OK]
