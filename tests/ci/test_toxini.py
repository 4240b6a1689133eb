"""tox.ini from matrix.yaml: the committed file is current, drift is named at its line, and
one stand-in environment goes through tox and tox-uv end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from harness.ci.toxini import RUN_PATH_REQUIREMENTS, TOX_INI, check_tox_ini, render_tox_ini
from harness.envs.backends import STANDIN_VAR
from harness.spec.matrix import load_matrix
from tests.paths import REPO, RESOURCES

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def harness(*args: str, repo: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={**{k: v for k, v in os.environ.items() if k != STANDIN_VAR}, **env},
    )


def test_committed_tox_ini_is_what_matrix_yaml_makes() -> None:
    out = harness("tox-ini", "--check")
    assert out.returncode == 0, out.stdout
    matrix = load_matrix(REPO / "matrix.yaml")
    text = (REPO / TOX_INI).read_text()
    for env in matrix.expand("full").environments:
        assert f"[testenv:{env.id}]" in text
        for requirement in env.requirements():
            assert f"\n    {requirement}\n" in text


def test_drift_is_named_at_its_line(tmp_path: Path) -> None:
    shutil.copy(REPO / "matrix.yaml", tmp_path / "matrix.yaml")
    assert harness("tox-ini", repo=tmp_path).returncode == 0
    assert check_tox_ini(tmp_path, load_matrix(tmp_path / "matrix.yaml")) is None
    matrix = (tmp_path / "matrix.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(matrix.replace('torch: "2.5.1"', 'torch: "2.5.0"', 1))
    out = harness("tox-ini", "--check", repo=tmp_path)
    assert out.returncode == 1
    assert f"stale: {tmp_path / TOX_INI}:" in out.stdout
    assert "py3.11-torch2.5.0-lightning2.4.0" in out.stdout  # the row's first environment
    assert "run `python -m harness tox-ini`" in out.stdout


def test_run_path_requirements_are_the_declared_dependencies() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert set(RUN_PATH_REQUIREMENTS) <= set(declared)


def test_rows_with_an_interpreter_are_not_tox_environments(tmp_path: Path) -> None:
    text = (RESOURCES / "existing" / "matrix.yaml").read_text()
    text = text.replace('lightning: ["0"]\n', 'lightning: ["0"]\n    interpreter: "/x/python"\n')
    text += "\n"  # keep the file valid YAML
    (tmp_path / "matrix.yaml").write_text(
        text.replace(
            "environments:\n",
            'environments:\n  - {torch: "2.0.0", python: ["3.11"], lightning: ["2.0.0"]}\n',
        )
    )
    rendered = render_tox_ini(load_matrix(tmp_path / "matrix.yaml"))
    assert "[testenv:py3.11-torch2.0.0-lightning2.0.0]" in rendered
    assert "torch1.16.0" not in rendered


@pytest.mark.slow
def test_one_standin_environment_through_tox(tmp_path: Path) -> None:
    """tox + tox-uv build the environment (six standing in for torch), and the harness
    inside it runs that environment's cells with the existing-interpreter backend."""
    tox = shutil.which("tox")
    assert tox, "tox is in the test extras"
    project = tmp_path / "project"
    shutil.copytree(RESOURCES / "entries" / "tiny" / "faults", project / "repros/tiny/faults")
    (project / "matrix.yaml").write_text(
        (RESOURCES / "reliability" / "matrix.yaml").read_text().replace("PYTHON", PY)
    )
    (project / "harness").symlink_to(REPO / "harness")  # `python -m harness` from tox_root
    standin = {STANDIN_VAR: "six=={torch}"}
    assert harness("tox-ini", repo=project, **standin).returncode == 0
    env_id = f"py{PY}-torch1.16.0-lightning0"
    assert f"[testenv:{env_id}]" in (project / TOX_INI).read_text()
    out = subprocess.run(
        [tox, "-e", env_id, "--workdir", str(tmp_path / "tox"), "--", "--machine", "m"],
        cwd=project,
        env={**os.environ, **standin},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"-> environment {env_id}" in out.stdout
    interpreter = tmp_path / "tox" / env_id / "bin" / "python"
    records = [
        json.loads(line) for line in (project / "results/records/m.jsonl").read_text().splitlines()
    ]
    assert {r["env"] for r in records} == {env_id}
    assert {r["outcome"] for r in records} == {"reproduced", "other_error", "ok", "wrong_result"}
    assert all(r["versions"]["six"] == "1.16.0" for r in records)
    frozen = subprocess.run(
        ["uv", "pip", "freeze", "--python", str(interpreter)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "six==1.16.0" in frozen  # tox-uv installed the environment's pins
