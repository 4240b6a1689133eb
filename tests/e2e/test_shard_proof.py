"""The 3-shard proof (scripts/shard_proof.py) on a tiny project: three environments (this
interpreter, six standing in for torch), run whole and as 3 shards into 3 records folders
under 3 machine names, merged: the records equal the whole run's (timing and machine
aside) and the rendered report is byte for byte the same. And the comparison can fail."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs.backends import STANDIN_VAR
from harness.outcomes import Outcome
from harness.store.jsonl import Store
from tests.paths import REPO, RESOURCES

SCRIPT = REPO / "scripts" / "shard_proof.py"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _script():
    spec = importlib.util.spec_from_file_location("shard_proof", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    shutil.copytree(
        RESOURCES / "entries" / "tiny" / "faults",
        root / "repros" / "tiny" / "faults",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    document = root / "repros" / "tiny" / "faults" / "document.md"
    document.write_text(
        document.read_text()
        + "".join(
            f"<!-- harness:{b}:begin -->\n<!-- harness:{b}:end -->\n"
            for b in ("measured-rates", "verification")
        )
    )
    (root / "matrix.yaml").write_text(
        (RESOURCES / "shards" / "matrix.yaml").read_text().replace("PYTHON", PY)
    )
    return root


@pytest.mark.slow
def test_three_shards_merged_equal_the_whole_run(project: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    env = {**os.environ, STANDIN_VAR: "six=={torch}", "PYTHONPATH": str(REPO)}
    env.pop("HARNESS_ENVS_DIR", None)
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--project",
            str(project),
            "--work",
            str(work),
            "--envs-dir",
            str(tmp_path / "envs"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    print(out.stdout)  # the measured figures, for docs/how-to/ci-and-merge.md
    assert out.returncode == 0, out.stdout + out.stderr
    # 3 environments x (5 fp32 + 6 fp16 variants) x 2 trials
    assert "whole run: 66 records" in out.stdout
    for k, env_id in enumerate(
        (
            f"py{PY}-torch1.15.0-lightning0",
            f"py{PY}-torch1.16.0-lightning0",
            f"py{PY}-torch1.17.0-lightning0",
        ),
        1,
    ):
        assert (
            f"shard {k}/3: 22 records" in out.stdout and f"machine ci-{k}, {env_id}" in out.stdout
        )
    assert "merged again: merged: 0 records added, 66 already present, 0 conflicting" in out.stdout
    assert "merged store: 66 records from 3 machines: ci-1 (" in out.stdout
    assert (
        "records equal (ignoring started_at, duration_s, run_s, machine, machine_id, imported_from): True"
        in out.stdout
    )
    assert "reports identical: True" in out.stdout

    # the comparison sees a lost shard, and a report that differs by one outcome
    proof = _script()
    whole = Store(work / "whole").load().records
    two = [r for k in (1, 2) for r in Store(work / f"shard-{k}").load().records]
    assert proof.normalised(whole) != proof.normalised(two)
    changed = [
        dataclasses.replace(r, outcome=Outcome.CRASHED) if i == 0 else r
        for i, r in enumerate(whole)
    ]
    copy = tmp_path / "render"
    shutil.copytree(work / "project", copy)
    assert proof.report_bytes(copy, whole) != proof.report_bytes(copy, changed)


@pytest.mark.slow
def test_resume_is_per_machine_through_the_cli(project: Path, tmp_path: Path) -> None:
    env = {**os.environ, STANDIN_VAR: "six=={torch}", "PYTHONPATH": str(REPO)}
    env.pop("HARNESS_ENVS_DIR", None)

    def run(*args: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "--repo",
                str(project),
                "run",
                "--no-report",
                "--envs-dir",
                str(tmp_path / "envs"),
                "--env",
                f"py{PY}-torch1.17.0-lightning0",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=project,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    run("--machine", "box-a")
    # another machine in the same results folder: what box-a ran is not done for box-b
    assert "resume: 0 of 22 jobs already stored, 22 to run (records of machine box-b (" in run(
        "--machine", "box-b", "--resume"
    )
    assert "resume: 22 of 22 jobs already stored, 0 to run (records of machine box-a (" in run(
        "--machine", "box-a", "--resume"
    )
    records = Store(project / "results" / "records").load().records
    assert sorted({r.machine for r in records}) == ["box-a", "box-b"] and len(records) == 44
