"""The report's cache of rendered entries (harness/report/cache.py): a report taken partly
from the cache writes exactly the bytes a report without it writes, renders only the
entries whose inputs changed, and never trusts a cache file or an output blindly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.outcomes import Outcome
from harness.report import outputs as report
from harness.report.cache import CACHE_DIR
from harness.report.outputs import render_all
from harness.report.render import answers, html, jsonout
from tests.report.test_render import entry, records

OTHERS = [f"pytorch/other-{i}" for i in range(4)]


@pytest.fixture(autouse=True)
def two_entries_a_data_file(monkeypatch):
    # two entries per data file, section file and part of the answers file, so that the
    # five entries make three of each
    monkeypatch.setattr(html, "CELL_FILE_ENTRIES", 2)
    monkeypatch.setattr(html, "SECTION_FILE_ENTRIES", 2)
    monkeypatch.setattr(answers, "ANSWERS_PART_ENTRIES", 2)
    monkeypatch.setattr(jsonout, "PART_ENTRIES", 2)


def store() -> list:
    base = records()
    return base + [dataclasses.replace(r, entry=eid) for eid in OTHERS for r in base]


def rendered_entries(monkeypatch) -> list[int]:
    """The index of every entry rendered from now on (not taken from the cache)."""
    seen: list[int] = []
    real = report._render

    def spy(job):
        seen.extend(i for i, _ in job.items)
        return real(job)

    monkeypatch.setattr(report, "_render", spy)
    return seen


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and CACHE_DIR.parts[0] not in p.relative_to(root).parts
    }


def test_a_rerun_on_the_same_records_renders_nothing_and_changes_nothing(tmp_path, monkeypatch):
    e = entry(tmp_path)
    first = render_all(store(), [e], tmp_path / "out", workers=1)
    before = files(tmp_path / "out")
    seen = rendered_entries(monkeypatch)
    again = render_all(store(), [e], tmp_path / "out", workers=1)
    assert seen == []
    assert files(tmp_path / "out") == before
    assert again.outputs == first.outputs and again.verdicts == first.verdicts
    assert not again.written and again.up_to_date


def test_only_the_entry_whose_records_changed_is_rendered_and_bytes_equal_a_cold_report(
    tmp_path, monkeypatch
):
    e = entry(tmp_path)
    render_all(store(), [e], tmp_path / "warm", workers=1)
    changed = store()
    i = next(i for i, r in enumerate(changed) if r.entry == OTHERS[2] and r.variant == "ctl")
    changed[i] = dataclasses.replace(changed[i], outcome=Outcome.CRASHED, reason="signal 11")
    seen = rendered_entries(monkeypatch)
    warm = render_all(changed, [e], tmp_path / "warm", workers=1)
    # entries in id order: pytorch/hostile, then other-0..3; other-2 is the fourth
    assert seen == [3]
    written = {p.relative_to(tmp_path / "warm").as_posix() for p in warm.written}
    # its page, its data file, section file and part of the answers file (entries 2 and 3),
    # and the whole files it changes
    assert written == {
        "compat/pytorch__other-2.md",
        "compat/pytorch__other-2.png",
        "cells/0001.js",
        "sections/0001.js",
        "answers/0001.js",
        "aggregates/0001.jsonl",
    }  # not index.html, nor answers.js: a crashed control changes neither's counts; nor
    # compat.json, the index of the aggregates' parts: the same entries and records
    cold = render_all(changed, [e], tmp_path / "cold", workers=1, cache=False)
    assert files(tmp_path / "warm") == files(tmp_path / "cold")
    assert warm.verdicts == cold.verdicts
    assert [p.relative_to(tmp_path / "warm") for p in warm.outputs] == [
        p.relative_to(tmp_path / "cold") for p in cold.outputs
    ]


def test_a_new_entry_renders_itself_alone(tmp_path, monkeypatch):
    e = entry(tmp_path)
    render_all(store(), [e], tmp_path / "out", workers=1)
    more = store() + [dataclasses.replace(r, entry="pytorch/other-1a") for r in records()]
    seen = rendered_entries(monkeypatch)
    render_all(more, [e], tmp_path / "out", workers=1)
    # hostile, other-0, other-1 keep their place (files 0 and 1); other-1a is new; other-2
    # moves from file 1 to file 2, other-3 stays in file 2: what they render names no file,
    # so they are taken from the cache as they are
    assert seen == [3]
    render_all(more, [e], tmp_path / "cold", workers=1, cache=False)
    assert files(tmp_path / "out") == files(tmp_path / "cold")


def test_a_changed_definition_renders_its_entry_again(tmp_path, monkeypatch):
    e = entry(tmp_path)
    render_all(store(), [e], tmp_path / "out", workers=1)
    seen = rendered_entries(monkeypatch)
    retitled = dataclasses.replace(e, title="Another title")
    render_all(store(), [retitled], tmp_path / "out", workers=1)
    assert seen == [0]
    # its section (in its section file, loaded when the entry is opened) has the new title
    assert "Another title" in (tmp_path / "out" / "sections" / "0000.js").read_text(
        encoding="utf-8"
    )


def test_an_output_edited_or_removed_is_rendered_again_and_check_mode_names_it(
    tmp_path, monkeypatch
):
    e = entry(tmp_path)
    out = tmp_path / "out"
    render_all(store(), [e], out, workers=1)
    good = files(out)
    (out / "compat" / "pytorch__other-0.md").write_text("edited by hand\n", encoding="utf-8")
    (out / "cells" / "0002.js").unlink()
    seen = rendered_entries(monkeypatch)
    checked = render_all(store(), [e], out, workers=1, check=True)
    assert seen == [1]  # a data file is put together from every entry's line: none rendered
    stale = {p.relative_to(out).as_posix() for p in checked.stale_outputs}
    assert stale == {"compat/pytorch__other-0.md", "cells/0002.js"}
    assert not checked.written
    seen.clear()
    render_all(store(), [e], out, workers=1)
    assert seen == [1]
    assert files(out) == good


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"{not json"),
        lambda p: p.write_bytes(b'{"format": 1, "html": 3}'),
        lambda p: p.with_suffix(".bin").write_bytes(b"short"),
        lambda p: p.with_suffix(".bin").unlink(),
        lambda p: p.write_text(
            p.read_text(encoding="utf-8").replace('"compat/', '"../../../outside/'),
            encoding="utf-8",
        ),
    ],
    ids=["not-json", "wrong-shape", "bin-short", "bin-missing", "path-outside"],
)
def test_a_damaged_cache_file_is_not_taken(tmp_path, monkeypatch, damage):
    e = entry(tmp_path)
    out = tmp_path / "out"
    render_all(store(), [e], out, workers=1)
    good = files(out)
    for meta in (out / CACHE_DIR).glob("*.json"):
        damage(meta)
    seen = rendered_entries(monkeypatch)
    summary = render_all(store(), [e], out, workers=1)
    assert sorted(seen) == [0, 1, 2, 3, 4]
    assert files(out) == good and not summary.written
    assert not (tmp_path / "outside").exists()


def test_check_mode_writes_no_cache_and_a_cache_only_holds_current_entries(tmp_path):
    e = entry(tmp_path)
    out = tmp_path / "out"
    render_all(store(), [e], out, workers=1, check=True)
    assert not (out / CACHE_DIR).exists()
    render_all(store(), [e], out, workers=1)
    assert len(list((out / CACHE_DIR).glob("*.json"))) == 5
    render_all(records(), [e], out, workers=1)  # the other entries are gone
    assert len(list((out / CACHE_DIR).glob("*.json"))) == 1


def test_write_back_from_the_cache_fills_a_document_edited_since(tmp_path, monkeypatch):
    e = entry(tmp_path)
    out = tmp_path / "out"
    render_all(store(), [e], out, workers=1)
    filled = e.document.read_text(encoding="utf-8")
    # the blocks emptied by hand: the cached texts fill them again, nothing re-rendered
    e.document.write_text(
        "".join(
            f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
            for b in ("measured-versions", "measured-rates", "verification")
        ),
        encoding="utf-8",
    )
    seen = rendered_entries(monkeypatch)
    stale = render_all(store(), [e], out, workers=1, check=True)
    assert stale.stale_documents == (e.document,)
    summary = render_all(store(), [e], out, workers=1)
    assert seen == [] and summary.documents_updated == (e.document,)
    assert e.document.read_text(encoding="utf-8") == filled


def test_a_record_digest_changes_with_every_field_and_not_with_other_entries():
    from harness.report.cache import record_digests
    from harness.store.columnar import RecordTable
    from harness.store.records import ExceptionInfo

    base = records()[0]
    digest = record_digests(RecordTable.of([base]))[base.entry]
    changes = {
        "variant": "wa",
        "kind": "control",
        "cell": base.cell + "x",
        "env": base.env + "x",
        "device": "cuda",
        "precision": "bf16",
        "trial": 7,
        "outcome": Outcome.OK,
        "reason": "r",
        "exception": ExceptionInfo("E", "m", "f", "t"),
        "checks": {"a": {"ok": True}},
        "duration_s": 1.5,
        "exit_code": 3,
        "signal": 9,
        "stdout_tail": "o",
        "stderr_tail": "e",
        "versions": {"torch": "9"},
        "provenance": {"host": "h"},
        "started_at": "2025-01-01T00:00:00+00:00",
        "machine": "m",
        "machine_id": "i",
        "imported_from": "x",
        "isolation": "fork" if base.isolation != "fork" else "process",
        "run_s": 0.25,
        "ran_in": base.env + "-with-numpy-lt2",
        "requires": {"numpy": "numpy<2"},
    }
    fields = {f.name for f in dataclasses.fields(base)} - {"entry", "schema"}
    assert fields <= set(changes), "a Record field this test does not change"
    for name, value in changes.items():
        other = dataclasses.replace(base, **{name: value})
        assert record_digests(RecordTable.of([other]))[base.entry] != digest, name
    # another entry's records (numbered before this one's) leave its digest as it was
    first = dataclasses.replace(base, entry="aaa/first")
    assert record_digests(RecordTable.of([first, base]))[base.entry] == digest


def test_a_changed_template_or_static_file_changes_every_key(monkeypatch):
    from harness.report import cache

    key = lambda: cache.entry_key("pytorch/x", "records", "definition")  # noqa: E731
    cache.code_fingerprint.cache_clear()
    try:
        before = key()
        monkeypatch.setattr(cache, "template_digest", lambda: "an edited template")
        cache.code_fingerprint.cache_clear()
        assert key() != before
    finally:
        monkeypatch.undo()
        cache.code_fingerprint.cache_clear()
    assert key() == before


def _old_file(path: Path, text: str) -> None:
    import os
    import time

    path.write_text(text)
    then = time.time() - 3600
    os.utime(path, (then, then))


def test_the_render_cache_never_reads_writes_or_deletes_through_a_link(tmp_path: Path) -> None:
    """results/.cache/render a link to another folder: prune unlinked its .json and .bin
    files there, put wrote there (issue 25, item 2)."""
    from harness.report.cache import RenderCache

    results = tmp_path / "results"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _old_file(elsewhere / "a.json", "theirs")
    _old_file(elsewhere / "b.bin", "theirs")
    (results / ".cache").mkdir(parents=True)
    (results / CACHE_DIR).symlink_to(elsewhere, target_is_directory=True)
    cache = RenderCache(results)
    assert cache.refused == f"{results / CACHE_DIR}: is a link (to {elsewhere}); " + (
        "the harness writes and deletes nothing through a link"
    )
    cache.prune(set())
    assert cache.get("a") is None
    assert sorted(p.name for p in elsewhere.iterdir()) == ["a.json", "b.bin"]

    # a real folder holding a link named like a cache file: the link goes, not its target
    (results / CACHE_DIR).unlink()
    (results / CACHE_DIR).mkdir()
    (results / CACHE_DIR / "c.json").symlink_to(elsewhere / "a.json")
    RenderCache(results).prune(set())
    assert list((results / CACHE_DIR).iterdir()) == []
    assert (elsewhere / "a.json").read_text() == "theirs"


def test_files_of_entries_not_reported_any_more_are_removed_and_check_names_them(tmp_path):
    e = entry(tmp_path)
    out = tmp_path / "out"
    render_all(store(), [e], out, workers=1)  # five entries: three files of each kind
    fewer = [r for r in store() if r.entry in {"pytorch/hostile", OTHERS[0]}]  # one of each
    gone = {
        *(f"{kind}/{n:04d}.js" for kind in ("cells", "sections", "answers") for n in (1, 2)),
        "aggregates/0001.jsonl",
        "aggregates/0002.jsonl",
        *(f"compat/pytorch__other-{i}.{ext}" for i in (1, 2, 3) for ext in ("md", "png")),
    }
    assert all((out / name).is_file() for name in gone)
    (out / "cells" / "notes.txt").write_text("mine")  # not a numbered file: left as it is
    (out / "compat" / "notes.md").write_text("mine")  # not an entry's name: left as it is
    (out / "aggregates" / "0009.jsonl").mkdir()  # a folder: left as it is

    checked = render_all(fewer, [e], out, workers=1, check=True)
    assert {p.relative_to(out).as_posix() for p in checked.leftovers} == gone
    assert not checked.up_to_date and all((out / name).is_file() for name in gone)

    done = render_all(fewer, [e], out, workers=1)
    assert {p.relative_to(out).as_posix() for p in done.leftovers} == gone
    assert not any((out / name).exists() for name in gone)
    assert (out / "cells" / "notes.txt").read_text() == "mine"
    assert (out / "compat" / "notes.md").read_text() == "mine"
    assert (out / "aggregates" / "0009.jsonl").is_dir()
    again = render_all(fewer, [e], out, workers=1, check=True)
    assert again.up_to_date and not again.leftovers
    fresh = tmp_path / "fresh"
    render_all(fewer, [e], fresh, workers=1, cache=False)
    # every output as a report of those two entries alone writes it, and the files a
    # person put there
    assert files(out) == files(fresh) | {"cells/notes.txt": b"mine", "compat/notes.md": b"mine"}
