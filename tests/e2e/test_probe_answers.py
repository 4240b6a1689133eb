"""Issue 36: `run --python` and `plan --python` use no probe answer unchecked. A program
that only prints the identify and probe lines (a fake Python) got `env_failed` records
stored under the environment it made up; one whose probe printed malformed JSON, a
traceback. Each is caused here through the real CLI, with a shell script as the fake."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.test_hostile import cli
from tests.e2e.test_reliability import Project

ECHO = """\
echo 'HARNESS-PYTHON 3.99.1'
echo 'HARNESS-BASE /usr/bin/python3'
echo 'HARNESS-PROBE {"versions": {"python": "3.99.1", "six": "77.0"}, "missing": {}}'
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _real_python_but_the_probe(answer: str) -> str:
    """A script that runs the real interpreter (so it identifies truthfully) except for
    the probe, which it answers with ``answer``."""
    return f"""\
case "$*" in
  *HARNESS-PROBE*) echo 'HARNESS-PROBE {answer}'; exit 0;;
esac
exec {sys.executable} "$@"
"""


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_program_that_only_echoes_the_identify_line_is_refused(
    project: Project, tmp_path: Path, command: str
) -> None:
    script = _script(tmp_path, ECHO)
    out = (
        project.run("--python", str(script))
        if command == "run"
        else cli(project, "plan", "--python", str(script))
    )
    text = out.stdout + out.stderr
    flat = " ".join(text.split())
    assert out.returncode == 2, text[:2000]
    assert f"--python {script}: not a Python" in flat
    assert "without running the harness's code" in flat
    assert "Traceback" not in text
    assert "py3.99" not in flat  # no environment named by what it made up
    assert not project.store.exists(), "nothing is stored"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("{not json", "health check answered no JSON"),
        ("[1, 2]", "health check answered no {versions, missing} object"),
        ('{"versions": {"six": "not-a-version"}, "missing": {}}', "'not-a-version'"),
        ('{"versions": {"python": "2.7.18", "six": "1.16.0"}, "missing": {}}', "Python '2.7.18'"),
    ],
    ids=["malformed-json", "not-an-object", "bad-version", "another-python"],
)
def test_a_probe_answer_that_fails_its_checks_is_env_failed_under_the_true_python(
    project: Project, tmp_path: Path, answer: str, said: str
) -> None:
    script = _script(tmp_path, _real_python_but_the_probe(answer))
    out = project.run("--python", str(script))
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text[-3000:]
    records = project.records()
    assert records, text[-3000:]
    true_python = f"py{sys.version_info[0]}.{sys.version_info[1]}-"
    for r in records:
        assert r["outcome"] == "env_failed"
        assert str(r["env"]).startswith(true_python + "torchnone-lightning"), r["env"]
        assert said in json.dumps(r, ensure_ascii=False), r
