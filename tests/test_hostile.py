"""Issue 11: a hostile reproducer, record, file or process cannot stop the harness. Each
test reproduces one of the issue's examples through the real CLI (or the real process)
and failed before the fix; the README's reliability table and docs/reliability.md name
them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_reliability import RESOURCES, Project, alive, wait_for

from harness.writeback import BLOCKS

HOSTILE = RESOURCES / "hostile"
SURROGATE = b"file \xff name".decode("utf-8", "surrogateescape")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project(tmp_path / "proj")
    for name in ("results", "disk"):
        shutil.copytree(HOSTILE / name, p.root / "repros" / "hostile" / name)
    blocks = "".join(f"<!-- harness:{b}:begin -->\n<!-- harness:{b}:end -->\n" for b in BLOCKS)
    for document in (p.root / "repros").glob("*/*/document.md"):
        document.write_text("The entry document.\n" + blocks)
    return p


def report(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project.root), "report", *args],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def by_variant(project: Project) -> dict[str, dict[str, object]]:
    return {str(r["variant"]): r for r in project.records()}


def test_bad_result_files_are_classified_and_every_other_record_is_stored(
    project: Project,
) -> None:
    """A reproducer writing its own result file with outcome "bogus" or checks [1, 2]
    raised in the worker thread and ended the run with a traceback."""
    done = project.run("--entry", "hostile/results", "--entry", "tiny/faults", "-j", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    records = by_variant(project)
    assert set(records) == {
        "bogus-outcome",
        "list-checks",
        "not-json",
        "surrogate",
        "fine",
        "documented",
        "other",
        "ok",
        "wrong",
        "control",
    }
    bogus, checks, garbage = records["bogus-outcome"], records["list-checks"], records["not-json"]
    assert bogus["outcome"] == "crashed"
    assert str(bogus["reason"]).startswith("the run's result file was refused: outcome: 'bogus'")
    assert checks["outcome"] == "crashed"
    assert "checks: must be an object, got list [1, 2]" in str(checks["reason"])
    assert garbage["outcome"] == "crashed" and "not UTF-8 JSON" in str(garbage["reason"])
    surrogate = records["surrogate"]
    assert surrogate["outcome"] == "other_error"
    assert surrogate["exception"]["message"] == "file \ufffd name"  # type: ignore[index]
    assert records["fine"]["outcome"] == "ok"
    assert report(project).returncode == 0


def test_a_stored_line_with_a_lone_surrogate_no_longer_stops_every_report(
    project: Project,
) -> None:
    """A record stored by an older harness with a lone surrogate in its text made every
    later report fail with UnicodeEncodeError."""
    assert project.run("--entry", "tiny/faults").returncode == 0
    lines = project.lines()
    hostile = json.loads(lines[1])
    hostile["exception"]["message"] = SURROGATE  # json.dumps writes it as \udcff
    hostile["trial"] = 1
    project.store.write_text("\n".join([*lines, json.dumps(hostile)]) + "\n")
    first = report(project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert report(project, "--check").returncode == 0
    page = (project.root / "results" / "compat" / "tiny__faults.md").read_text("utf-8")
    assert "file \ufffd name" in page


def test_a_full_disk_stops_the_run_with_a_clear_error_and_no_crashed_record(
    project: Project,
) -> None:
    """A reproducer that filled the disk turned the healthy jobs after it into crashed
    records ("exit status 1 without a result") that --resume then skipped. The disk is a
    real 4 MiB tmpfs mounted over TMPDIR in a private mount namespace (unshare -rm)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is absent")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {project.tmp}"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"no private tmpfs here: {probe.stderr.decode()[:200]}")
    # build the environment first, on the real disk (uv needs room of its own)
    warm = project.run("--entry", "hostile/disk", "--variant", "c-healthy")
    assert warm.returncode == 0, warm.stdout
    project.store.unlink()
    mount = f'mount -t tmpfs -o size=4m tmpfs {project.tmp} && exec "$@"'
    full = subprocess.run(
        ["unshare", "-rm", "sh", "-c", mount, "sh", *project.argv("--entry", "hostile/disk")],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = full.stdout + full.stderr
    assert full.returncode == 1, out
    assert "error: [Errno 28] no space left on the disk of" in out and "--resume" in out
    assert "Traceback" not in out
    assert not [r for r in project.records() if r["outcome"] == "crashed"], project.records()
    # the tmpfs went with its namespace: the disk has room again and resume measures all
    resumed = project.run("--entry", "hostile/disk", "--resume", "--variant", "*-healthy")
    assert resumed.returncode == 0, resumed.stdout
    assert {r["variant"]: r["outcome"] for r in project.records()} == {
        "b-healthy": "ok",
        "c-healthy": "ok",
    }


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if text[text.rindex(")") + 2 :].split()[1] == str(pid):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_render_workers_end_with_a_killed_report(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGKILL or SIGTERM of a report that forked render workers left them blocked for
    ever (each held its siblings' ends of the parent's pipes)."""
    proc = subprocess.Popen(
        [sys.executable, str(HOSTILE / "render_shards.py"), "300", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "rendering\n"
        wait_for(lambda: len(_children(proc.pid)) == 2, 60, "two render workers")
        workers = _children(proc.pid)
        os.kill(proc.pid, sig)
        proc.wait(30)
        started = time.monotonic()
        wait_for(lambda: not any(alive(w) for w in workers), 10, "the workers to end")
        print(f"MEASURED render workers ended {time.monotonic() - started:.2f} s after {sig.name}")
    finally:
        for w in _children(proc.pid):
            os.kill(w, signal.SIGKILL)
        proc.kill()
        proc.wait()


def test_outputs_are_written_under_temp_names_no_other_process_uses(project: Project) -> None:
    """Two reports over one results folder wrote the same `<file>.tmp`, and one exited
    with FileNotFoundError. A fixed temp name taken by another writer (here: a folder in
    its place) must not matter."""
    assert project.run("--entry", "tiny/faults").returncode == 0
    compat = project.root / "results" / "compat"
    compat.mkdir(parents=True)
    for name in ("tiny__faults.md.tmp", "tiny__faults.png.tmp"):
        (compat / name).mkdir()
    (project.root / "results" / "index.html.tmp").mkdir()
    document = project.root / "repros" / "tiny" / "faults" / "document.md.harness-tmp"
    document.mkdir()
    done = report(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (compat / "tiny__faults.md").is_file()
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "harness", "--repo", str(project.root), "report"],
            env=project.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    for p in both:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    assert not list((project.root / "results").rglob(".*.tmp"))
