"""The report step (harness/report/outputs.py): what render_all writes and where, that check
mode writes nothing, that the bytes depend neither on the records' order nor on how many
processes render, and that a worker that dies or fails loses nothing and hides nothing."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.aggregate import aggregate
from harness.report import outputs as report
from harness.report.outputs import render_all
from harness.report.render.html import cell_files, html_part, render_html, section_files
from harness.report.render.jsonout import render_json
from harness.report.render.markdown import render_entry
from harness.report.render.plots import render_png
from tests.report.test_render import entry, records

OUTPUTS = [
    "compat/pytorch__hostile.md",
    "compat/pytorch__hostile.png",
    "compat/pytorch__other.md",
    "compat/pytorch__other.png",
    "cells/0000.js",
    "answers.js",
    "answers/0000.js",
    "sections/0000.js",
    "index.html",
    "aggregates/0000.jsonl",
    "compat.json",
]


def two_entries() -> list:
    return records() + [dataclasses.replace(r, entry="pytorch/other") for r in records()]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the render cache too), by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def rel(paths, root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def renders_in(monkeypatch, log: Path) -> None:
    """Have every shard rendered from now on write its process id to ``log`` (a forked
    worker inherits the spy)."""
    real = report._render

    def spy(job):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        return real(job)

    monkeypatch.setattr(report, "_render", spy)


def pids(log: Path) -> list[int]:
    return [int(line) for line in log.read_text(encoding="utf-8").split()]


def needs_fork() -> None:
    if not report._can_fork():
        pytest.skip("fork unavailable here (platform, or other threads alive)")


def test_the_outputs_are_the_renderers_bytes_in_entry_order(tmp_path):
    e = entry(tmp_path)
    out = tmp_path / "results"
    summary = render_all(two_entries(), [e], out, workers=1)
    assert rel(summary.outputs, out) == OUTPUTS
    assert summary.written == summary.outputs and summary.stale_outputs == summary.outputs
    assert summary.documents_updated == (e.document,)
    aggs = aggregate(two_entries(), [e])
    hostile, other = aggs.entries
    assert (out / "index.html").read_text(encoding="utf-8") == render_html(aggs)
    for name, data in render_json(aggs).items():
        assert (out / name).read_bytes() == data
    assert [(out / name).read_text(encoding="utf-8") for name, _ in cell_files(aggs.entries)] == [
        text for _, text in cell_files(aggs.entries)
    ]
    sections = section_files([html_part(aggs.entries)])
    assert [(out / name).read_text(encoding="utf-8") for name, _ in sections] == [
        text for _, text in sections
    ]
    for a in (hostile, other):
        stem = a.id.replace("/", "__")
        assert (out / "compat" / f"{stem}.md").read_text(encoding="utf-8") == render_entry(a)
        assert (out / "compat" / f"{stem}.png").read_bytes() == render_png(a)
    # the hostile entry: confirmed 1, contradicted 2; the other, with no definition: confirmed 1
    assert summary.verdicts == {"confirmed": 2, "contradicted": 2}
    assert "<!-- harness:measured-rates:begin -->\n" in e.document.read_text(encoding="utf-8")


def test_a_rerun_writes_nothing_and_says_everything_is_up_to_date(tmp_path):
    e = entry(tmp_path)
    out = tmp_path / "results"
    first = render_all(two_entries(), [e], out, workers=1)
    before = tree(out)
    again = render_all(two_entries(), [e], out, workers=1, cache=False)
    assert again.outputs == first.outputs and not again.written and again.up_to_date
    assert tree(out) == before


def test_check_mode_writes_nothing_and_names_what_is_stale(tmp_path):
    e = entry(tmp_path)
    document = e.document.read_bytes()
    out = tmp_path / "results"
    fresh = render_all(two_entries(), [e], out, check=True)
    assert not out.exists()  # not a file, not the folder, not the cache
    assert e.document.read_bytes() == document
    assert rel(fresh.stale_outputs, out) == OUTPUTS and not fresh.written
    assert fresh.stale_documents == (e.document,) and not fresh.documents_updated
    assert not fresh.up_to_date

    render_all(two_entries(), [e], out)
    (out / "compat" / "pytorch__other.md").write_text("edited by hand\n", encoding="utf-8")
    (out / "index.html").unlink()
    before = tree(out)
    checked = render_all(two_entries(), [e], out, check=True)
    assert tree(out) == before
    assert rel(checked.stale_outputs, out) == ["compat/pytorch__other.md", "index.html"]
    assert not checked.written and not checked.stale_documents and not checked.up_to_date


def test_two_reports_of_the_same_records_in_another_order_are_byte_identical(tmp_path):
    e = entry(tmp_path)
    first = render_all(two_entries(), [e], tmp_path / "a", cache=False)
    second = render_all(list(reversed(two_entries())), [e], tmp_path / "b", cache=False)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert rel(first.outputs, tmp_path / "a") == rel(second.outputs, tmp_path / "b")
    assert first.verdicts == second.verdicts


def test_two_workers_write_the_bytes_and_summary_that_one_writes(tmp_path, monkeypatch):
    needs_fork()
    log = tmp_path / "pids"
    renders_in(monkeypatch, log)
    serial = render_all(two_entries(), [], tmp_path / "a", workers=1)
    assert pids(log) == [os.getpid()]
    log.unlink()
    forked = render_all(two_entries(), [], tmp_path / "b", workers=2)
    # one shard here, the other in a forked worker
    assert len(set(pids(log))) == 2 and os.getpid() in pids(log)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    for field in ("outputs", "written", "stale_outputs"):
        assert rel(getattr(forked, field), tmp_path / "b") == rel(
            getattr(serial, field), tmp_path / "a"
        )
    assert forked.verdicts == serial.verdicts
    again = render_all(two_entries(), [], tmp_path / "b", workers=2, check=True)
    assert again.up_to_date and not again.written


def test_the_caller_renders_every_shard_no_worker_has_begun(tmp_path, monkeypatch):
    """A slow worker holds only the shards it has begun: the one it renders and those its
    pool has queued for it (ProcessPoolExecutor's call queue holds two for one worker).
    The caller renders the rest, in any case the same bytes."""
    needs_fork()
    six = [dataclasses.replace(r, entry=f"pytorch/e{n}") for n in range(6) for r in records()]
    serial = render_all(six, [], tmp_path / "serial", workers=1)
    log = tmp_path / "pids"
    parent = os.getpid()
    real = report._render

    def slow_in_a_worker(job):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        if os.getpid() != parent:
            time.sleep(2)
        return real(job)

    monkeypatch.setattr(report, "_render", slow_in_a_worker)
    forked = render_all(six, [], tmp_path / "forked", workers=2)
    rendered = pids(log)
    assert len(rendered) == 6  # one shard an entry, each rendered once
    assert 1 <= len(rendered) - rendered.count(parent) <= 3
    assert tree(tmp_path / "forked") == tree(tmp_path / "serial")
    assert forked.verdicts == serial.verdicts


def test_a_worker_that_dies_loses_nothing_its_shard_is_rendered_here(tmp_path, monkeypatch):
    needs_fork()
    parent = os.getpid()
    real = report._render

    def dies_in_a_worker(job):
        if os.getpid() != parent:
            os._exit(9)  # as the OOM killer would end it: no exception, no reply
        return real(job)

    monkeypatch.setattr(report, "_render", dies_in_a_worker)
    render_all(two_entries(), [], tmp_path / "forked", workers=2)
    render_all(two_entries(), [], tmp_path / "serial", workers=1)
    assert tree(tmp_path / "forked") == tree(tmp_path / "serial")


def test_an_error_in_a_worker_is_raised_here_and_nothing_is_written(tmp_path, monkeypatch):
    needs_fork()
    parent = os.getpid()
    real = report._render

    def fails_in_a_worker(job):
        if os.getpid() != parent:
            raise ValueError(f"cannot render {job.items[0][1].id}")
        return real(job)

    monkeypatch.setattr(report, "_render", fails_in_a_worker)
    with pytest.raises(ValueError, match="cannot render pytorch/other"):
        render_all(two_entries(), [], tmp_path / "results", workers=2)
    assert not (tmp_path / "results").exists()


def test_workers_are_chosen_by_size_and_one_where_forking_is_unsafe(monkeypatch):
    monkeypatch.setattr(report, "_can_fork", lambda: True)
    assert report._workers(None, report._FORK_MIN_ENTRIES - 1) == 1
    assert report._workers(None, report._FORK_MIN_ENTRIES) == min(4, os.cpu_count() or 1)
    assert report._workers(3, 2) == 2 and report._workers(0, 10) == 1
    monkeypatch.setattr(report, "_can_fork", lambda: False)
    assert report._workers(4, 1000) == 1


def test_shards_are_runs_of_entries_with_about_as_many_records_each():
    aggs = [SimpleNamespace(n_runs=3 if n < 320 else 1) for n in range(643)]
    items = list(enumerate(aggs))
    shards = report._shards(items, 2)  # type: ignore[arg-type]
    # 1,283 records: the cut nearest half, after 214 entries of 3 (642 records)
    assert [part[0][0] for part in shards] == [0, 214]
    assert [item for part in shards for item in part] == items
    assert report._shards(items, 1) == [items]  # type: ignore[arg-type]
    assert report._shards(items[:1], 4) == [items[:1]]  # type: ignore[arg-type]
    assert len(report._shards(items, 4)) == 4  # type: ignore[arg-type]
    assert report._shards([], 4) == []


def test_a_failure_here_stops_the_workers_rather_than_waiting_for_them(tmp_path, monkeypatch):
    needs_fork()
    parent = os.getpid()

    def slow_in_a_worker(job):
        if os.getpid() != parent:
            time.sleep(120)
        raise KeyboardInterrupt  # Ctrl-C while this process renders its own shard

    monkeypatch.setattr(report, "_render", slow_in_a_worker)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        render_all(two_entries(), [], tmp_path / "results", workers=2)
    assert time.monotonic() - started < 30
    assert multiprocessing.active_children() == []
    assert not (tmp_path / "results").exists()


def _render_under_a_file_size_limit(out: str, the_entry, limit: int, queue) -> None:  # a child
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        render_all(two_entries(), [the_entry], out, workers=1, cache=False)
        queue.put("written")
    except Exception as exc:  # noqa: BLE001 - what the report raised is the answer
        queue.put(f"{type(exc).__name__}: {exc}")


def test_a_write_that_fails_half_way_changes_no_output(tmp_path: Path) -> None:
    """Issue 36, item 7: a full disk during `report` left the outputs half updated (the
    compat pages rewritten, index.html not). The outputs are staged and renamed together:
    a file-size limit that the small pages fit under and index.html does not leaves every
    output as it was, and the error names the file."""
    out = tmp_path / "out"
    docs = tmp_path / "docs"
    docs.mkdir()
    the_entry = entry(docs)
    render_all(records(), [the_entry], out, workers=1, cache=False)  # the outputs as they were
    before = tree(out)
    document = (docs / "document.md").read_bytes()
    size = len(before["index.html"])
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(
        target=_render_under_a_file_size_limit, args=(str(out), the_entry, size // 2, queue)
    )
    child.start()
    child.join(60)
    said = queue.get(timeout=5)
    assert said.startswith("ReportWriteError: ") and "no output was changed" in said, said
    assert "index.html" in said or ".tmp" in said
    assert tree(out) == before  # the other entry's pages were not added, nothing half written
    assert (docs / "document.md").read_bytes() == document
