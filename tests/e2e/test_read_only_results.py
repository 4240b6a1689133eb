"""Issue 36, item 7: a read-only `results/` gave tracebacks in `run` (after the
environment was built) and in `merge` (on the store's lock). Each now ends in the store's
named error (`error: <path>: cannot …: Read-only file system`) with nothing half written.
The folder is made read-only for real: a read-only bind mount in a private mount namespace
(unshare -rm), as the full-disk tests mount their tmpfs; skipped where that is not allowed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_reliability import Project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


def read_only(project: Project, folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run with ``folder`` mounted read-only over itself, for that process alone."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is absent")
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"{mount} && ! touch {folder}/.probe"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"no read-only bind mount here: {probe.stderr.decode()[:200]}")
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'{mount} && exec "$@"', "sh", *argv],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def harness(project: Project, *args: str) -> list[str]:
    return [sys.executable, "-m", "harness", "--repo", str(project.root), *args]


@pytest.mark.parametrize("records", ["a-store-that-has-records", "a-fresh-results-folder"])
def test_run_into_a_read_only_results_folder_names_it(project: Project, records: str) -> None:
    warm = project.run("--entry", "tiny/faults", "--variant", "ok")  # the environment built
    assert warm.returncode == 0, warm.stdout + warm.stderr
    results = project.root / "results"
    if records == "a-fresh-results-folder":
        shutil.rmtree(results)
        results.mkdir()
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    out = read_only(project, results, *project.argv("--entry", "tiny/faults"))
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "Traceback" not in text, text[-3000:]
    flat = " ".join(text.split())
    assert "Read-only file system" in flat and f"{results}/records" in flat
    assert "0 of 5 records stored" in flat
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before


@pytest.mark.parametrize("records", ["a-store-that-has-records", "a-fresh-results-folder"])
def test_merge_into_a_read_only_results_folder_names_it(project: Project, records: str) -> None:
    warm = project.run("--entry", "tiny/faults", "--variant", "ok")
    assert warm.returncode == 0, warm.stdout + warm.stderr
    other = project.root / "other.jsonl"
    other.write_text(project.store.read_text().replace('"machine": "', '"machine": "other-'))
    results = project.root / "results"
    if records == "a-fresh-results-folder":
        shutil.rmtree(results)
        results.mkdir()
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    out = read_only(project, results, *harness(project, "merge", str(other)))
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text, text[-3000:]
    flat = " ".join(text.split())
    assert f"error: {results}/records" in flat and "Read-only file system" in flat
    assert "nothing was merged" in flat
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before
