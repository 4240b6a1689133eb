"""The CI workflows: valid for GitHub (its vendored schema), clean under zizmor (offline),
and the nightly's job matrix really generated from the plan."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.spec.matrix import load_matrix
from tests.paths import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
NIGHTLY = REPO / ".github" / "workflows" / "nightly.yml"


def _tool(name: str) -> str:
    """A console script of the test extras: beside this interpreter, else on PATH."""
    found = shutil.which(
        name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    if found is None:
        pytest.fail(f"{name} is not installed: `pip install -e .[test]` installs it")
    return found


def test_there_are_workflows() -> None:
    assert NIGHTLY in WORKFLOWS


def test_workflows_match_githubs_schema() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_zizmor_finds_nothing_offline() -> None:
    # pinned actions (full commit SHA), least permissions, no persisted credentials, no
    # template injection into run: blocks; --offline: no network in the tests
    out = subprocess.run(
        [_tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No findings to report" in out.stdout + out.stderr


def _nightly() -> dict[str, Any]:
    return yaml.safe_load(NIGHTLY.read_text())


def test_the_nightly_matrix_is_generated_by_the_plan_job() -> None:
    jobs = _nightly()["jobs"]
    plan_run = "\n".join(step.get("run", "") for step in jobs["plan"]["steps"])
    for shard_job, output in (("cpu", "cpu"), ("gpu", "gpu")):
        job = jobs[shard_job]
        assert job["needs"] == "plan"
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.{output}) }}}}"
        assert f"{output}=$(python -m harness plan --github" in plan_run
        run = "\n".join(step.get("run", "") for step in job["steps"])
        # each job runs its shard's environments under its machine name, no report
        assert '--machine "$MACHINE" --no-report' in run and '--env "$env"' in run
        uploads = [
            s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")
        ]
        assert uploads[0]["with"]["path"] == "results/records/${{ matrix.machine }}.jsonl"
    report = "\n".join(step.get("run", "") for step in jobs["report"]["steps"])
    assert report.index("harness diff HEAD incoming") < report.index("harness merge incoming")
    assert 'nox -s report -- --since "$SHA"' in report  # the commit the shards ran
    # the night: its snapshot and summary after the merge, one issue per regressed entry
    nightly = 'python -m harness nightly --summary "$GITHUB_STEP_SUMMARY" --issues gh'
    assert report.index("harness merge incoming") < report.index(nightly)
    settle = "python -m harness run --profile cpu --settle 900 --settle-only --machine ci-settle"
    assert report.index("harness merge incoming") < report.index(settle) < report.index(nightly)
    # the extra trials' records name a commit that is pushed: the merge is committed first
    assert report.index("git commit") < report.index(settle)
    assert jobs["report"]["permissions"] == {"contents": "write", "issues": "write"}


def test_the_nightly_adds_new_releases_first_and_every_job_runs_that_commit() -> None:
    jobs = _nightly()["jobs"]
    plan_run = "\n".join(step.get("run", "") for step in jobs["plan"]["steps"])
    assert plan_run.index("harness plan --new-releases --write") < plan_run.index("--github")
    assert "git commit" in plan_run and "matrix.yaml tox.ini" in plan_run
    assert jobs["plan"]["outputs"]["sha"] == "${{ steps.rows.outputs.sha }}"
    for name in ("cpu", "gpu", "report"):
        checkout = next(
            s for s in jobs[name]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")
        )
        assert checkout["with"]["ref"] == "${{ needs.plan.outputs.sha }}", name
    assert jobs["gpu"]["runs-on"] == ["self-hosted", "gpu"]
    # one environment per CPU shard, within GitHub's matrix limit
    assert "--profile cpu --shards 256" in plan_run


def test_plan_refuses_more_shards_than_a_github_matrix_runs() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "plan",
            "--github",
            "--profile",
            "cpu",
            "--shards",
            "257",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 2 and "at most 256 jobs" in out.stdout


def test_the_plan_commands_of_the_nightly_give_a_matrix_its_jobs_can_use() -> None:
    text = NIGHTLY.read_text()
    used = set(re.findall(r"\bmatrix\.(\w+) }}", text))  # ${{ matrix.X }}, not matrix.yaml
    commands = re.findall(r"\$\((python -m harness plan --github[^)]*)\)", text)
    assert len(commands) == 2
    matrix = load_matrix(REPO / "matrix.yaml")
    for command in commands:
        argv = command.split()[1:]
        out = subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.count("\n") == 1  # one line for $GITHUB_OUTPUT
        include = json.loads(out.stdout)["include"]
        profile = argv[argv.index("--profile") + 1]
        assert 1 <= len(include) <= int(argv[argv.index("--shards") + 1])
        assert all(used <= set(item) for item in include), used
        envs = [e for item in include for e in item["envs"].split()]
        # every environment of the profile in exactly one shard
        assert sorted(envs) == sorted(e.id for e in matrix.expand(profile).environments)
        assert len({item["machine"] for item in include}) == len(include)
