"""A full disk, with and without --keep-going (issue 12): without it the run stops with a
clear error; with it, what cannot run becomes an env_failed record with the reason and the
rest goes on; --resume then retries the env_failed jobs (they measured nothing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.execute.steps import disk_full_text
from harness.outcomes import Outcome
from harness.store.jsonl import Store
from harness.store.records import Record
from tests.e2e.test_hostile import (  # noqa: F401  (project: the fixture, tiny project with hostile/disk)
    project,
    run_on_a_full_disk,
)
from tests.e2e.test_reliability import Project

FAKE_UV = """#!/bin/sh
# an installer on a full disk: what uv prints when it cannot write
echo "error: failed to create directory \\`$3\\`: No space left on device (os error 28)" >&2
exit 2
"""


def with_full_disk_installer(proj: Project) -> dict[str, str]:
    """PATH with a `uv` that fails as uv does on a full disk, first."""
    bin_dir = proj.root / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def two_environments(proj: Project) -> None:
    text = (proj.root / "matrix.yaml").read_text()
    proj.set_matrix(
        text.replace(
            'lightning: ["0"]\n',
            'lightning: ["0"]\n  - torch: "1.15.0"\n    python: ["PYTHON"]\n    lightning: ["0"]\n',
            1,
        )
    )


def test_installer_words_for_a_full_disk_are_recognised() -> None:
    assert disk_full_text("error: ... No space left on device (os error 28)")
    assert disk_full_text("OSError: [Errno 122] Disk quota exceeded")
    assert not disk_full_text("No solution found when resolving dependencies")


def test_a_full_disk_while_building_stops_the_run_without_keep_going(project: Project) -> None:  # noqa: F811
    two_environments(project)
    out = project.run("--entry", "hostile/disk", **with_full_disk_installer(project))
    assert out.returncode == 1, out.stdout
    assert "no space left on the disk of" in out.stdout and "--keep-going" in out.stdout
    records = project.records()
    # the environment that failed is recorded (it measured its failure); the next one is
    # not tried: it would fail the same way
    assert {r["outcome"] for r in records} == {"env_failed"}
    assert len({r["env"] for r in records}) == 1
    assert "No space left on device" in records[0]["reason"]


def test_keep_going_records_env_failed_for_every_environment_and_ends_normally(
    project: Project,  # noqa: F811
) -> None:
    two_environments(project)
    out = project.run(
        "--entry", "hostile/disk", "--keep-going", **with_full_disk_installer(project)
    )
    assert out.returncode == 0, out.stdout
    records = project.records()
    assert len(records) == 2 * 3  # two environments x three variants, none lost
    assert {r["outcome"] for r in records} == {"env_failed"}
    assert all("No space left on device" in r["reason"] for r in records)
    # the disk has room again: --resume retries what measured nothing
    again = project.run("--entry", "hostile/disk", "--resume", "--variant", "*-healthy")
    assert again.returncode == 0, again.stdout
    assert "4 to run" in again.stdout


@pytest.mark.parametrize("isolation", ["fork", "process"])
def test_keep_going_through_a_full_run_folder_disk(project: Project, isolation: str) -> None:  # noqa: F811
    """The job that fills TMPDIR (a real 4 MiB tmpfs in a private mount namespace) and the
    healthy jobs after it: env_failed records naming the disk, not crashed ones."""
    full = run_on_a_full_disk(project, "--isolation", isolation, "--keep-going")
    out = full.stdout + full.stderr
    assert full.returncode == 0, out
    assert "Traceback" not in out
    records = project.records()
    assert len(records) == 3  # every job has its record
    assert not [r for r in records if r["outcome"] == "crashed"], records
    cut = [r for r in records if r["outcome"] == "env_failed"]
    assert cut and all("no space left on the disk of" in r["reason"] for r in cut)


def test_resume_retries_env_failed_but_not_measured_jobs(tmp_path: Path) -> None:
    store = Store(tmp_path, "m")
    base = dict(
        entry="e/x",
        kind="baseline",
        cell="py3.11-torch2.0.0-lightning2.0.0-cpu-fp32",
        env="py3.11-torch2.0.0-lightning2.0.0",
        device="cpu",
        precision="fp32",
        trial=0,
        started_at="2026-11-30T00:00:00+00:00",
    )
    store.append(Record(variant="a", outcome=Outcome.ENV_FAILED, reason="no index", **base))
    store.append(Record(variant="b", outcome=Outcome.CRASHED, reason="signal 11", **base))
    done = store.done_keys()
    assert {k.variant for k in done} == {"b"}  # a crash is a measurement; env_failed is not
