"""What a report shows as it goes (harness/report/progress.py): its phases live on a
terminal, gone when it is done; elsewhere a line for each slow phase only; on a terminal its
renderers are still forked (the display draws from no thread while they are)."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
from rich.console import Console

from harness.config import Config
from harness.report.outputs import render_all
from harness.report.pipeline import render_reports
from harness.report.progress import ReportProgress
from tests.report.test_outputs import needs_fork, pids, renders_in, tree, two_entries
from tests.report.test_uptodate import (  # noqa: F401 (fixtures: a project of the seed's records)
    committed_lines,
    project,
    seed_lines,
)


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def log() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=300), out


def test_off_a_terminal_a_phase_is_told_when_it_ends_only_where_it_was_slow():
    console, out = log()
    with (
        ReportProgress(console, slow_s=3600) as progress,
        progress.phase("reading the store (1 MB)"),
    ):
        pass
    assert out.getvalue() == ""
    with ReportProgress(console, slow_s=0) as progress:
        with progress.phase("reading the store (1 MB)"):
            pass
        with progress.phase("rendering 3 entries", 3) as advance:
            advance(3)
    lines = out.getvalue().splitlines()
    assert [line.rsplit(": ", 1)[0] for line in lines] == [
        "report: reading the store (1 MB)",
        "report: rendering 3 entries",
    ]
    assert all(line.endswith(" s") for line in lines)


def test_a_phase_that_fails_is_not_told_as_done():
    console, out = log()
    with (
        pytest.raises(OSError),
        ReportProgress(console, slow_s=0) as progress,
        progress.phase("writing the outputs and the caches"),
    ):
        raise OSError("disk full")
    assert out.getvalue() == ""


def test_quiet_says_nothing_anywhere():
    for console, out in (terminal(), log()):
        with (
            ReportProgress(console, slow_s=0, quiet=True) as progress,
            progress.phase("aggregating 2 entries"),
        ):
            pass
        assert out.getvalue() == ""


def test_on_a_terminal_the_phase_and_its_count_are_drawn_and_gone_at_the_end():
    console, out = terminal()
    with ReportProgress(console) as progress:
        with progress.phase("rendering 40 entries", 40) as advance:
            advance(10)
            drawn = out.getvalue()
        after = out.getvalue()
    assert "rendering 40 entries" in drawn and "10/40" in drawn
    # transient: the last thing written erases the display's line
    assert after.rstrip("\r\n").endswith("\x1b[2K") or after.endswith("\x1b[?25h")
    # and no line of the slow-phase kind, which is for logs only
    assert "report: rendering" not in after


def test_on_a_terminal_a_thread_draws_only_in_phases_that_fork_nothing():
    console, _ = terminal()
    alone = threading.active_count()
    with ReportProgress(console) as progress:
        assert threading.active_count() == alone
        with progress.phase("reading the store (1 GB)"):
            assert threading.active_count() == alone + 1
        assert threading.active_count() == alone
        with progress.phase("rendering 2 entries", 2, forks=True):
            assert threading.active_count() == alone
    assert threading.active_count() == alone


def test_on_a_terminal_the_renderers_are_forked_and_every_entry_counted(tmp_path, monkeypatch):
    needs_fork()
    counted: list[int] = []
    real = ReportProgress.phase

    def spy(self, what, total=None, *, forks=False):
        cm = real(self, what, total, forks=forks)
        if not what.startswith("rendering"):
            return cm

        class Counting:
            def __enter__(self):
                advance = cm.__enter__()

                def told(n: int) -> None:
                    counted.append(n)
                    advance(n)

                return told

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Counting()

    monkeypatch.setattr(ReportProgress, "phase", spy)
    serial = render_all(two_entries(), [], tmp_path / "a", workers=1)
    assert counted == [2]
    counted.clear()
    renders = tmp_path / "pids"
    renders_in(monkeypatch, renders)
    console, out = terminal()
    with ReportProgress(console) as progress:
        forked = render_all(two_entries(), [], tmp_path / "b", workers=2, progress=progress)
    # one shard here, the other in a forked worker, each counted once
    assert len(set(pids(renders))) == 2 and os.getpid() in pids(renders)
    assert sorted(counted) == [1, 1]
    assert "rendering 2 entries" in out.getvalue()
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert forked.verdicts == serial.verdicts


def test_a_report_off_a_terminal_prints_its_slow_phases_before_its_summary(
    project: Path,  # noqa: F811
    monkeypatch,
):
    # every phase counts as slow: the report's own display tells each of them
    real_init = ReportProgress.__init__

    def init(self, console, *, slow_s=0.0, quiet=False):
        real_init(self, console, slow_s=0.0, quiet=quiet)

    monkeypatch.setattr(ReportProgress, "__init__", init)
    out = io.StringIO()
    assert render_reports(Config(repo=project), Console(file=out, width=300)) == 0
    lines = out.getvalue().splitlines()
    told = [
        line.rsplit(": ", 1)[0]
        for line in lines
        if line.startswith("report: ") and line.endswith(" s")
    ]
    assert told[0].startswith("report: reading the store (")
    assert "report: finding the entries whose records changed" in told
    assert any(t.startswith("report: aggregating ") for t in told)
    assert any(t.startswith("report: rendering ") for t in told)
    assert told[-1] == "report: writing the outputs and the caches"
    assert lines[-1].startswith("report: ") and "outputs under" in lines[-1]
