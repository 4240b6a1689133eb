"""Sessions: `matrix` (the main job), `tests`, `report`, and one `env` session per
environment of matrix.yaml (`nox -l` lists them; `nox -s "env(py3.10-torch1.12.1-lightning2.1.4)"`
runs every cell of that environment)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

nox.options.sessions = ["matrix"]
nox.options.reuse_existing_virtualenvs = True
# sessions are made and filled by uv where it is installed (`pip install nox uv`), else by
# virtualenv and pip; benchmarks/bench_nox_setup.py measures the two
nox.options.default_venv_backend = "uv|virtualenv"
# a local wheel folder that pip is told about (PIP_FIND_LINKS) is one for uv too
if os.environ.get("PIP_FIND_LINKS") and "UV_FIND_LINKS" not in os.environ:
    os.environ["UV_FIND_LINKS"] = ",".join(
        p for p in os.environ["PIP_FIND_LINKS"].split() if Path(p).is_dir()
    )
HERE = Path(__file__).parent
HARNESS_PYTHON = "3.11"  # the orchestrator's own Python; targets pick theirs in matrix.yaml
# the test session runs the seed reproducers on a real torch: the release that lies on
# this kind of machine as a local CPU wheel (pip finds it; anywhere else pip downloads it)
TEST_TORCH = ["torch==2.13.0", "lightning==2.6.6", "numpy"]
# the huggingface reproducers' own packages, so that their tests (tests/repros/deadends/
# huggingface) run their postconditions on real transformers and onnx instead of skipping
# (not onnxscript: with it, torch 2.13's default exporter runs where the committed records of
# deadends/pytorch/onnx-export-error say it cannot, and tests/e2e/test_seed_repros compares)
TEST_REPRO_PACKAGES = ["transformers==5.24.0", "onnx==1.23.2"]
# the knowledge base's own code and records (its validator imports jsonschema, which the
# package lists only as an extra)
KB_PACKAGE = ["deadends-dev==0.9.0", "jsonschema"]


def _environment_ids() -> list[str]:
    """The environments of the full profile; their excluded cells are added to `nox -l`'s header."""
    global __doc__
    sys.path.insert(0, str(HERE))
    try:
        import yaml  # noqa: F401  (harness.spec.matrix needs it; nox itself does not)

        from harness.spec.matrix import load_matrix
    except ImportError:
        return []  # nox installed without PyYAML: the per-environment sessions are not listed
    expansion = load_matrix(HERE / "matrix.yaml").expand("full")
    reasons: dict[str, int] = {}
    for excluded in expansion.excluded:
        key = f"{excluded.reason} ({excluded.where})"
        reasons[key] = reasons.get(key, 0) + 1
    __doc__ = (
        (__doc__ or "")
        + "\nExcluded cells (python -m harness list --profile full names each):\n"
        + "".join(f"  {n} cells: {reason}\n" for reason, n in sorted(reasons.items()))
    )
    return [e.id for e in expansion.environments]


@nox.session(python=HARNESS_PYTHON)
def matrix(session: nox.Session) -> None:
    """Build/reuse the environments and run the matrix (`-- --profile cpu`, `-- --resume`, `-- --shard 2/4`)."""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "run", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def tests(session: nox.Session) -> None:
    """The project's own tests, in parallel (pytest-xdist), without the slow real-environment
    ones (`nox -s slow_tests` runs those; CI runs both). Arguments after `--` replace the
    default selection, e.g. `nox -s tests -- tests/store`."""
    _pytest(session, *(session.posargs or ["-m", "not slow"]))


@nox.session(python=HARNESS_PYTHON)
def slow_tests(session: nox.Session) -> None:
    """The slow tests: real environments, real torch reproducers, tox, shards (CI runs them)."""
    _pytest(session, "-m", "slow", *session.posargs)


def _pytest(session: nox.Session, *args: str) -> None:
    session.install(*TEST_TORCH[:1])
    session.install("-e", ".[test]", *TEST_TORCH[1:], *TEST_REPRO_PACKAGES)
    session.run("python", "-m", "pytest", "-n", "auto", *args)


@nox.session(python=HARNESS_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and format check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "harness", "tests", "benchmarks", "noxfile.py")


@nox.session(python=HARNESS_PYTHON)
def benchmarks(session: nox.Session) -> None:
    """The report's benchmark against a plain read of its store (`-- --quick`: a minute,
    what CI runs, so a change that breaks or slows the report shows in its log); then the
    benchmark of answers, which fails below its floor of answers right."""
    session.install("-e", ".")
    session.run("python", "benchmarks/bench_report.py", *session.posargs)
    session.run("python", "benchmarks/bench_answers.py", "--check", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def bench_run(session: nox.Session) -> None:
    """What a run costs through the CLI, warm worker against fresh interpreter, on
    environments already built (`-- --quick`: the smoke profile's, a minute or two, what CI
    runs after its smoke matrix; ratios printed, never enforced: only a breakage fails)."""
    session.install("-e", ".")
    session.run("python", "benchmarks/bench_run.py", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def report(session: nox.Session) -> None:
    """Re-render tables, HTML, JSON and write-back from stored records (`-- --check` for CI)."""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "report", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def check(session: nox.Session) -> None:
    """Validate the entries (`-- --smells` for CI: fail on a smell neither fixed nor explained)."""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "check", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def corrections(session: nox.Session) -> None:
    """Write the kept knowledge-base records' corrections as four proposals by kind, with a
    summary (results/corrections/; `-- --check` for CI; `nox -s kb` checks them with the
    knowledge base's own code)."""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "corrections", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
def kb(session: nox.Session) -> None:
    """The corrections checked by the knowledge base's own code: deadends-dev's validator,
    lookup and process_outcomes on a copy of its records with each proposal applied
    (scripts/kb_check.py). A session of its own: the package's top-level modules are named
    data, generator and mcp."""
    session.install(*KB_PACKAGE)
    session.run("python", "scripts/kb_check.py", *session.posargs)


@nox.session(python=HARNESS_PYTHON, name="tox-ini")
def tox_ini(session: nox.Session) -> None:
    """Write tox.ini from matrix.yaml (`-- --check` for CI: fail if it differs)."""
    session.install("-e", ".")
    session.run("python", "-m", "harness", "tox-ini", *session.posargs)


@nox.session(python=HARNESS_PYTHON)
@nox.parametrize("env", _environment_ids())
def env(session: nox.Session, env: str) -> None:
    """Every cell of one environment (all profiles' devices and precisions)."""
    session.install("-e", ".")
    session.run(
        "python", "-m", "harness", "run", "--profile", "full", "--env", env, *session.posargs
    )
