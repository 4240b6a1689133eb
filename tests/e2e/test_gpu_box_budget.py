"""scripts/gpu-box.sh's window, run here on the CPU with a stand-in for torch: the dry run
prints the plan and stores nothing; a budget too short for the plan stores the most valuable
jobs first and says what it left; the next call goes on from there, in one record file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.envs.backends import STANDIN_VAR
from tests.e2e.test_gpu_box import SCRIPT, SEEDS, copy_project

STANDIN = {STANDIN_VAR: "packaging=={torch}"}


def gpu_box(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (STANDIN_VAR, "PYTHONPATH")}
    return subprocess.run(
        ["bash", str(root / SCRIPT), *args],
        cwd=root,
        env={
            **base,
            "PYTHON": sys.executable,
            "GPU_BOX_MACHINE": "box",
            "GPU_BOX_ENTRIES": SEEDS,
            **STANDIN,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def phase(record: dict[str, object]) -> int:
    if record["trial"] != 0:
        return 2
    return 0 if record["kind"] == "baseline" else 1


def test_the_dry_run_prints_the_plan_and_stores_nothing(tmp_path: Path) -> None:
    root = copy_project(tmp_path / "box")
    out = gpu_box(root, "--dry-run")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    for expected in (
        "jobs to run (0 already stored), -j 8, budget 570 s",
        "+ 2 s CUDA start per child on a cuda cell",
        "phase 1, baselines, one trial:",
        "phase 2, one trial of every other variant:",
        "phase 3, the other trials:",
        "fits: ",
    ):
        assert expected in text, text
    assert not (root / "results" / "records" / "box.jsonl").exists()


def test_a_short_budget_stores_the_most_valuable_jobs_and_the_next_call_goes_on(
    tmp_path: Path,
) -> None:
    root = copy_project(tmp_path / "box")
    records = root / "results" / "records" / "box.jsonl"
    # 75 s: planned for 45 s, 30 s of it the start; with no stored record in this copy each
    # job is estimated at 3 + 2 s: 15 s on 8 slots hold 24 jobs
    short = {"GPU_BOX_BUDGET_S": "75"}
    first = gpu_box(root, **short)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "budget 45 s: 24 of " in first.stdout
    assert "run this script again to finish (--resume)" in first.stdout
    stored = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(stored) == 24 and {r["device"] for r in stored} == {"cuda"}
    assert {phase(r) for r in stored} <= {0, 1}  # the baselines' first trials came first
    assert sorted(phase(r) for r in stored) == [phase(r) for r in stored]
    second = gpu_box(root, **short)
    assert second.returncode == 0
    assert "resume: 24 of " in second.stdout and "budget 45 s: 24 of " in second.stdout
    both = [json.loads(line) for line in records.read_text().splitlines()]
    keys = [(r["entry"], r["variant"], r["cell"], r["trial"]) for r in both]
    assert len(both) == 48 and len(set(keys)) == 48  # nothing run twice
    # the whole budget: the rest, and the record file holds each job once
    rest = gpu_box(root)
    assert rest.returncode == 0 and "nothing left" in rest.stdout
    final = [json.loads(line) for line in records.read_text().splitlines()]
    assert len({(r["entry"], r["variant"], r["cell"], r["trial"]) for r in final}) == len(final)
    assert {r["trial"] for r in final} == {0, 1, 2}
    assert [p.name for p in records.parent.glob("*.jsonl")] == ["box.jsonl"]
