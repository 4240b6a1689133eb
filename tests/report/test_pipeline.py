"""`python -m harness report` imports what a report uses (harness/report/pipeline.py), not
the runner's environments, plans and budgets: a report after a run that appended to ten
entries takes about 2.5 s at a million records, of which importing the harness was 0.55 s
and is 0.35 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

# what only a run needs (harness/execute/steps.py and what it imports)
RUNNERS = ("harness.execute", "harness.envs.backends", "harness.spec.matrix")

SCRIPT = """
import runpy, sys
sys.argv = ["harness", "--repo", sys.argv[1], "report"]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit as exc:
    assert not exc.code, exc.code
print("\\n".join(sorted(sys.modules)))
"""


def _modules_of_a_report(project: Path, script: str = SCRIPT) -> list[str]:
    """The lines a report of an empty project printed, then every module it had imported."""
    (project / "repros").mkdir()
    (project / "results" / "records").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", script, str(project)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.splitlines()


def _runners(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(RUNNERS)]


def test_a_report_imports_none_of_the_runners_modules(tmp_path: Path) -> None:
    modules = _modules_of_a_report(tmp_path)
    assert any(line.startswith("report: 0 records") for line in modules)  # it did report
    assert "harness.report.outputs" in modules  # and rendered
    assert _runners(modules) == []


def test_the_check_sees_a_runner_module_imported(tmp_path: Path) -> None:
    """The test above can fail: the same report with the runner's steps imported first
    names them."""
    script = SCRIPT.replace("import runpy, sys", "import runpy, sys, harness.execute.steps")
    assert "harness.execute.steps" in _runners(_modules_of_a_report(tmp_path, script))
