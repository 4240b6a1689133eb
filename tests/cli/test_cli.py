"""The command line on the real repository: list, report --check, bad arguments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report.render.jsonout import read_compat
from tests.paths import REPO, committed_records, committed_tree


def harness(*args: str, repo: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )


def test_list_shows_environments_exclusions_and_jobs() -> None:
    out = harness("list", "--profile", "full")
    assert out.returncode == 0, out.stderr
    assert "py3.9-torch1.10.2-lightning1.9.5" in out.stdout
    assert "torch 1.10 publishes wheels for Python <= 3.9 only" in out.stdout
    assert "matrix.yaml:" in out.stdout
    assert "jobs in profile 'full'" in out.stdout


def test_bad_shard_and_unknown_profile_are_named() -> None:
    out = harness("run", "--shard", "3/2")
    assert out.returncode == 2 and "--shard K/N needs 1 <= K <= N" in out.stdout
    out = harness("list", "--trials", "0")
    assert out.returncode == 2 and "--trials: must be from 1 to 100, got 0" in out.stderr
    out = harness("list", "--profile", "cpu", "--trials", "3")
    assert "jobs in profile 'cpu' (3 trial(s) each)" in out.stdout
    out = harness("list", "--profile", "nightly-typo")
    assert out.returncode == 2 and "nightly-typo" in out.stdout and "matrix.yaml" in out.stdout


def test_report_check_passes_on_the_committed_results_and_fails_when_stale(
    reported: Path,
) -> None:
    ok = harness("report", "--check", repo=reported)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    page = next((reported / "results" / "compat").glob("*.md"))
    page.write_text(page.read_text() + "hand edit\n")
    stale = harness("report", "--check", repo=reported)
    assert stale.returncode == 1
    assert f"stale: {page}" in stale.stdout
    assert harness("report", repo=reported).returncode == 0  # re-rendering repairs it
    assert harness("report", "--check", repo=reported).returncode == 0
    # a part numbered past the last (as removed entries leave): named, then removed
    left = reported / "results" / "aggregates" / "0099.jsonl"
    left.write_text("{}\n")
    stale = harness("report", "--check", repo=reported)
    assert stale.returncode == 1
    assert f"left by removed entries: {left}" in stale.stdout
    done = harness("report", repo=reported)
    assert done.returncode == 0 and "1 files of removed entries deleted" in done.stdout
    assert not left.exists()
    assert harness("report", "--check", repo=reported).returncode == 0


def test_report_keeps_its_caches_and_no_cache_neither_reads_nor_writes_them(
    tmp_path: Path,
) -> None:
    copy_project(tmp_path)
    cache = tmp_path / "results" / ".cache"
    fresh = harness("report", "--no-cache", repo=tmp_path)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert not cache.exists()
    cached = harness("report", repo=tmp_path)
    assert cached.returncode == 0, cached.stdout + cached.stderr
    assert {p.name for p in cache.iterdir()} == {
        "render",
        "snapshot",
        "report-state.json",
        "report-basis.json",
        "report-assembly.json",
    }
    # the same summary either way (the figures and verdicts come from the same records)
    assert fresh.stdout.splitlines()[-1] == cached.stdout.splitlines()[-1]
    # a page edited by hand: the cached block is not taken, the page is rendered again
    page = next((tmp_path / "results" / "compat").glob("*.md"))
    good = page.read_bytes()
    page.write_text("hand edit\n")
    assert harness("report", repo=tmp_path).returncode == 0
    assert page.read_bytes() == good


@pytest.fixture(scope="session")
def _reported_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A project path of this worker, and the caches (results/.cache) a report of the
    committed tree made there: one full report a worker, where each test made its own (an
    xdist_group would make it once a session, but pytest 9.2 ignores the node id xdist 3.8
    sets for --dist loadgroup, so the group's tests are spread like any others)."""
    root = tmp_path_factory.mktemp("reported")
    project = root / "project"
    project.mkdir()
    copy_project(project)
    first = harness("report", repo=project)
    assert first.returncode == 0, first.stdout + first.stderr
    caches = root / "caches"
    shutil.move(project / "results" / ".cache", caches)
    return project, caches


@pytest.fixture
def reported(_reported_once: tuple[Path, Path]) -> Path:
    """The committed tree, copied afresh, with the caches of a report of it: its reports
    render only what a test changed. The caches key an entry by its paths (report/cache.py),
    so the copy is made at the one path where they were made. The tests about the caches
    themselves (test_report_keeps_its_caches_...) start from none, on a copy of their own."""
    project, caches = _reported_once
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir()
    copy_project(project)
    shutil.copytree(caches, project / "results" / ".cache")
    return project


def copy_project(to: Path) -> None:
    """The committed tree (git: not what a local run appended or re-rendered), copied."""
    for name in ("matrix.yaml", "repros", "results"):
        src = committed_tree() / name
        if src.is_dir():
            # (not this checkout's caches: results/.cache)
            shutil.copytree(src, to / name, ignore=shutil.ignore_patterns("__pycache__", ".cache"))
        else:
            shutil.copy(src, to / name)


def test_a_newer_record_of_another_machine_is_in_the_report(reported: Path) -> None:
    """Issue 9's reproduction: one record of vm.jsonl copied into ci-cpu-1.jsonl with another
    outcome, host and a newer start. It used to vanish (the file named last won, keyed
    without the machine); now both machines' records are in the report."""
    import json

    records = reported / "results" / "records"
    before = harness("report", repo=reported)
    n = int(before.stdout.split("report: ")[1].split(" records")[0])
    d = json.loads((records / "vm.jsonl").read_text().splitlines()[5])
    d["outcome"] = "crashed" if d["outcome"] != "crashed" else "timeout"
    d["reason"] = "measured on the CI runner"
    d["provenance"] = {**d["provenance"], "host": "ci-runner-host"}
    d["started_at"] = "2027-01-01T00:00:00+00:00"
    d["machine"], d["machine_id"] = "ci-cpu-1", ""  # a schema-4 record names its machine
    (records / "ci-cpu-1.jsonl").write_text(json.dumps(d) + "\n")
    out = harness("report", repo=reported)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"report: {n + 1} records" in out.stdout
    compat = read_compat(reported / "results")
    text = json.dumps(compat)
    assert "ci-runner-host" in text and "2027-01-01T00:00:00+00:00" in text
    cells = "".join(p.read_text() for p in (reported / "results" / "cells").glob("*.js"))
    assert "measured on the CI runner" in cells and "ci-runner-host" in cells
    page = (reported / "results" / "compat" / (d["entry"].replace("/", "__") + ".md")).read_text()
    assert "ci-runner-host" in page


def _a_record_the_report_reads() -> dict:
    """The last committed record of vm.jsonl whose variant still reads it (not retired, not
    rewritten since it ran)."""
    import json

    from harness.spec.entries import load_entries

    entries = {e.id: e for e in load_entries(committed_tree() / "repros")}
    for line in reversed((committed_records() / "vm.jsonl").read_text().splitlines()):
        d = json.loads(line)
        e = entries.get(d["entry"])
        if e is None or d["variant"] in e.retired:
            continue
        try:
            since = e.variant(d["variant"]).rewritten
        except KeyError:
            continue
        if since is None or d["started_at"] >= since:
            return d
    raise AssertionError("no committed record of vm.jsonl is read")


def test_merge_brings_another_machines_records_into_the_report(
    reported: Path, tmp_path: Path
) -> None:
    # another machine measured one more trial of one cell: its own file, its own provenance
    import json

    d = _a_record_the_report_reads()
    d["trial"] = 7
    d["provenance"] = {**d["provenance"], "host": "gpu-box-7", "gpu": "NVIDIA H200"}
    other = tmp_path / "gpu-box-7.jsonl"
    other.write_text(json.dumps(d) + "\n")
    merged = harness("merge", str(other), repo=reported)
    assert merged.returncode == 0 and "1 records added" in merged.stdout
    again = harness("merge", str(other), repo=reported)
    assert "0 records added, 1 already present" in again.stdout
    assert harness("report", repo=reported).returncode == 0
    page = (reported / "results" / "compat" / (d["entry"].replace("/", "__") + ".md")).read_text()
    assert "gpu-box-7" in page and "NVIDIA H200" in page


def test_merge_names_a_conflicting_reimport_and_exits_1(tmp_path: Path) -> None:
    import json

    copy_project(tmp_path)
    d = json.loads((committed_records() / "vm.jsonl").read_text().splitlines()[0])
    d.update(schema=4, machine="gpu-box-7", machine_id="0123456789ab", imported_from="")
    d["provenance"] = {**d["provenance"], "host": "gpu-box-7"}
    first = tmp_path / "gpu-box-7.jsonl"
    first.write_text(json.dumps(d) + "\n")
    assert harness("merge", str(first), repo=tmp_path).returncode == 0
    d["reason"] = "edited after the run"
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "gpu-box-7.jsonl").write_text(json.dumps(d) + "\n")
    out = harness("merge", str(edited), repo=tmp_path)
    assert out.returncode == 1, out.stdout
    assert (
        f"{edited / 'gpu-box-7.jsonl'}:1: conflicts with the stored record of the same run"
        in out.stdout
    )
    assert "reason differ; the stored one is kept" in out.stdout
    assert "0 records added, 0 already present, 1 conflicting" in out.stdout
