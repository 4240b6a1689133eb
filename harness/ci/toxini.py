"""tox.ini, generated from matrix.yaml: one tox environment per matrix environment.

tox (with tox-uv's ``uv-venv-runner``) builds each environment from its pins, and inside
it runs the harness with the existing-interpreter backend (``run --python {env_python}``):
tox users get the same cells and records as ``python -m harness run`` builds with its own
uv environments. The file is never edited by hand: ``python -m harness tox-ini`` writes
it, ``--check`` (run by CI) fails when it differs from what matrix.yaml makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.envs.backends import EnvSpec
from harness.spec.matrix import Matrix

__all__ = ["RUN_PATH_REQUIREMENTS", "TOX_INI", "check_tox_ini", "render_tox_ini"]

TOX_INI = "tox.ini"
# What `harness run` imports (the report needs numpy and Pillow besides); the same
# specifiers as pyproject.toml's dependencies (tests/ci/test_toxini.py holds them equal)
RUN_PATH_REQUIREMENTS = ("packaging>=23", "PyYAML>=6", "rich>=13")
REPORT_ENV = "report"
HARNESS_PYTHON = "3.11"


def _list(items: Sequence[str]) -> str:
    return "".join(f"\n    {item}" for item in items)


def render_tox_ini(matrix: Matrix, standin: str | None = None) -> str:
    """The text of tox.ini for ``matrix``: every environment with a cell no rule excludes,
    except those matrix.yaml names an existing interpreter for; each runs the cells of the
    profile ``full`` (every device and precision) where there is one, else the default's."""
    profile = "full" if "full" in matrix.profiles else matrix.default_profile
    envs = sorted(
        {
            cell.env
            for cell in matrix.candidates()
            if not cell.env.interpreter and matrix.excluding_rule(cell) is None
        }
    )
    ids = [e.id for e in envs]
    out = [
        "# Generated from matrix.yaml by `python -m harness tox-ini`: do not edit (CI runs",
        "# `python -m harness tox-ini --check`). One tox environment per matrix environment, built",
        "# by tox-uv (uv-venv-runner) from its pins; inside it the harness runs that environment's",
        f"# cells (profile {profile}) in the environment's own interpreter, installing nothing",
        "# more. `tox -e <id>` runs one, `tox p` all of them and then `report`. See",
        "# docs/how-to/tox.md. Local wheel folders: `UV_FIND_LINKS=/opt/wheels tox -e <id>`.",
        "",
        "[tox]",
        f"requires ={_list(('tox>=4.2', 'tox-uv>=1.11'))}",
        f"env_list ={_list([*ids, REPORT_ENV])}",
        "skip_missing_interpreters = false",
        "",
        "[testenv]",
        "description = the cells of {env_name} in its own interpreter (matrix.yaml)",
        "runner = uv-venv-runner",
        "package = skip",
        "change_dir = {tox_root}",
    ]
    if standin:
        out.append("pass_env = HARNESS_STANDIN")
    out += [
        f"commands = python -m harness run --python {{env_python}} --profile {profile} "
        "--no-report {posargs}",
    ]
    for env in envs:
        spec = EnvSpec.of(env, standin)
        out += ["", f"[testenv:{env.id}]", f"base_python = python{env.python}"]
        if env.find_links:
            out.append(
                f"# local wheels, where they exist: UV_FIND_LINKS={','.join(env.find_links)}"
            )
        out.append(f"deps ={_list([*spec.requirements, *RUN_PATH_REQUIREMENTS])}")
    out += [
        "",
        f"[testenv:{REPORT_ENV}]",
        "description = render the reports from the records the environments stored",
        f"base_python = python{HARNESS_PYTHON}",
        "package = editable",
        f"depends ={_list(ids)}",
        "commands = python -m harness report {posargs}",
        "",
    ]
    return "\n".join(out)


def check_tox_ini(repo: Path, matrix: Matrix, standin: str | None = None) -> str | None:
    """None when the committed tox.ini is what matrix.yaml makes; else what is wrong."""
    path = repo / TOX_INI
    want = render_tox_ini(matrix, standin)
    try:
        have = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"{path} is missing"
    if have == want:
        return None
    for number, (a, b) in enumerate(
        zip(have.splitlines(), want.splitlines(), strict=False), start=1
    ):
        if a != b:
            return f"{path}:{number}: is {a!r}, matrix.yaml makes {b!r}"
    return f"{path}: {len(have.splitlines())} lines, matrix.yaml makes {len(want.splitlines())}"
