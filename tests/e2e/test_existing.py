"""The `existing` environment backend through the real CLI: `run --python PATH` and matrix
rows with `interpreter:`, in real interpreters (this one with a stand-in, a bare venv without
torch, a venv holding only what a GPU box's stack has, and a real torch where one is here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from packaging.version import Version

from harness.envs.backends import STANDIN_VAR, EnvFailed, find_interpreter
from tests.paths import REPO, RESOURCES

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
# packaging stands in for torch: every interpreter that runs the harness has it
STANDIN = "packaging=={torch}"
STANDIN_ENV = f"py{PY}-torch{Version(__import__('packaging').__version__).public}-lightning0"
# what a bare GPU stack has (the GPU box's premise): the harness's run path needs no more
BARE_STACK = ("packaging", "PyYAML", "rich", "numpy", "Pillow")


class Project:
    """A tiny project in a temp dir: the test matrix and the tiny/faults entry (or others)."""

    def __init__(self, root: Path, entries: tuple[tuple[Path, str], ...] = ()) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(RESOURCES / "existing" / "matrix.yaml", root / "matrix.yaml")
        for source, entry_id in entries or ((RESOURCES / "entries/tiny/faults", "tiny/faults"),):
            shutil.copytree(
                source, root / "repros" / entry_id, ignore=shutil.ignore_patterns("__pycache__")
            )

    def run(
        self,
        *args: str,
        python: str = sys.executable,
        standin: str | None = STANDIN,
        command: str = "run",
        path: str | None = None,
        checkout: bool = True,
        timeout: float = 240,
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != STANDIN_VAR}
        env["PYTHONPATH"] = str(REPO)
        if standin:
            env[STANDIN_VAR] = standin
        if path is not None:
            env["PATH"] = path
        if not checkout:
            env.pop("PYTHONPATH")  # the harness as installed in that interpreter
        extra = ["--no-report", "--machine", "m", "--timeout", "60"] if command == "run" else []
        return subprocess.run(
            [python, "-m", "harness", "--repo", str(self.root), command, *extra, *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def records(self) -> list[dict[str, object]]:
        store = self.root / "results" / "records" / "m.jsonl"
        return [json.loads(line) for line in store.read_text().splitlines()]


def _by_variant_cell(records: list[dict[str, object]]) -> dict[tuple[object, object], object]:
    return {(r["variant"], r["cell"]): r["outcome"] for r in records}


def test_standin_interpreter_runs_its_cells_named_by_what_it_has(tmp_path: Path) -> None:
    project = Project(tmp_path)
    out = project.run("--python", sys.executable)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"-> environment {STANDIN_ENV}" in out.stdout
    records = project.records()
    outcomes = _by_variant_cell(records)
    cpu = f"{STANDIN_ENV}-cpu-fp32"
    assert outcomes[("documented", cpu)] == "reproduced"
    assert outcomes[("other", cpu)] == "other_error"
    assert outcomes[("ok", cpu)] == "ok"
    assert outcomes[("wrong", cpu)] == "wrong_result"
    assert outcomes[("control", cpu)] == "ok"
    cuda = [r for r in records if r["device"] == "cuda"]
    assert cuda and all(r["outcome"] == "skipped" for r in cuda)
    assert {r["reason"] for r in cuda} == {
        "no CUDA here: torch was not imported (a stand-in environment)"
    }
    for record in records:
        assert record["env"] == STANDIN_ENV
        versions = record["versions"]
        assert isinstance(versions, dict)
        assert versions["packaging"] == __import__("packaging").__version__
        assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
        provenance = record["provenance"]
        assert isinstance(provenance, dict)
        assert provenance["cuda"] == "none" and provenance["compute_capability"] == "none"


def test_interpreter_without_torch_is_env_failed_with_the_reason(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    project = Project(tmp_path / "project")
    out = project.run("--python", str(venv / "bin" / "python"), standin=None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    env_id = f"py{PY}-torchnone-lightningnone"
    assert f"env_failed {env_id}" in out.stdout
    records = project.records()
    assert records and {r["outcome"] for r in records} == {"env_failed"}
    reason = str(records[0]["reason"])
    assert "torch does not import: ModuleNotFoundError: No module named 'torch'" in reason
    assert "lightning/pytorch_lightning does not import: ModuleNotFoundError" in reason
    assert {r["env"] for r in records} == {env_id}


def test_missing_standin_names_what_it_stands_for(tmp_path: Path) -> None:
    project = Project(tmp_path)
    out = project.run("--python", sys.executable, standin="no-such-standin-x=={torch}")
    assert out.returncode == 0, out.stdout + out.stderr
    reason = str(project.records()[0]["reason"])
    assert "no_such_standin_x (standing in for torch) does not import" in reason


def test_python_that_is_not_there_is_bad_input(tmp_path: Path) -> None:
    project = Project(tmp_path)
    out = project.run("--python", str(tmp_path / "nowhere" / "python"))
    assert out.returncode == 2
    assert f"--python {tmp_path / 'nowhere' / 'python'}: no such executable file" in out.stdout
    assert not (tmp_path / "results").exists()


def test_list_applies_the_profiles_devices_not_its_versions(tmp_path: Path) -> None:
    project = Project(tmp_path)
    # profile gpu selects torch 1.16.0; the interpreter has another "torch": its cells stay
    out = project.run("--python", sys.executable, "--profile", "gpu", command="list")
    assert out.returncode == 0, out.stdout + out.stderr
    assert STANDIN_ENV in out.stdout
    assert "cells: cuda-fp32 cuda-bf16" in out.stdout
    assert "cpu-fp32" not in out.stdout


def test_matrix_row_naming_an_interpreter(tmp_path: Path) -> None:
    project = Project(tmp_path)
    standin_version = STANDIN_ENV.split("-torch")[1].split("-")[0]
    (tmp_path / "matrix.yaml").write_text(
        (RESOURCES / "existing" / "matrix.yaml")
        .read_text()
        .replace(
            '  - torch: "1.16.0"\n    python: ["3.11"]\n    lightning: ["0"]\n',
            f'  - torch: "{standin_version}"\n    python: ["{PY}"]\n    lightning: ["0"]\n'
            f'    interpreter: "{sys.executable}"\n'
            f'  - torch: "0.1.0"\n    python: ["{PY}"]\n    lightning: ["0"]\n'
            f'    interpreter: "{sys.executable}"\n',
        )
        .replace('torch: ["1.16.0"]', f'torch: ["{standin_version}"]')
    )
    out = project.run("--profile", "cpu-fp32")
    assert out.returncode == 0, out.stdout + out.stderr
    records = project.records()
    good = [r for r in records if r["env"] == STANDIN_ENV]
    assert {r["outcome"] for r in good} >= {"reproduced", "ok", "other_error"}
    wrong = [r for r in records if r["env"] == f"py{PY}-torch0.1.0-lightning0"]
    assert wrong and {r["outcome"] for r in wrong} == {"env_failed"}
    assert f"has {STANDIN_ENV}" in str(wrong[0]["reason"])
    assert f"not py{PY}-torch0.1.0-lightning0" in str(wrong[0]["reason"])


def test_interpreter_row_takes_one_environment_and_installs_nothing(tmp_path: Path) -> None:
    from harness.spec.matrix import MatrixError, load_matrix

    base = (RESOURCES / "existing" / "matrix.yaml").read_text()
    for row, message in (
        ('lightning: ["0", "1"]\n    interpreter: "/x"', "list one python and one lightning"),
        ('lightning: ["0"]\n    interpreter: "/x"\n    pins: ["numpy<2"]', "nothing is installed"),
    ):
        (tmp_path / "m.yaml").write_text(base.replace('lightning: ["0"]', row))
        with pytest.raises(MatrixError, match=message) as info:
            load_matrix(tmp_path / "m.yaml")
        assert info.value.line is not None


def _torch_interpreter() -> str:
    """A real interpreter with torch and lightning: this one (nox -s tests installs them),
    or the shared torch 2.13.0 environment; the test needs one."""
    probe = "import torch, lightning"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0:
        return sys.executable
    envs = Path(os.environ.get("HARNESS_ENVS_DIR", REPO / ".envs"))
    for name in ("py3.11-torch2.13.0-lightning2.6.6", "py3.11-torch2.4.1-lightning2.5.6"):
        python = envs / name / "bin" / "python"
        if python.exists():
            return str(python)
    pytest.skip("needs torch and lightning: run in `nox -s tests`, or set HARNESS_ENVS_DIR")


@pytest.mark.slow
@pytest.mark.torch
def test_real_torch_interpreter(tmp_path: Path) -> None:
    python = _torch_interpreter()
    entry = "pytorch/grad-scale-unscale-error"
    project = Project(tmp_path, ((REPO / "repros" / entry, entry),))
    shutil.copy(REPO / "repros" / "reprokit.py", tmp_path / "repros")  # the seeds' helpers
    out = project.run("--python", python, "--variant", "control*", "-j", "2", standin=None)
    assert out.returncode == 0, out.stdout + out.stderr
    records = project.records()
    versions = records[0]["versions"]
    assert isinstance(versions, dict)
    torch = Version(versions["torch"]).public
    lightning = Version(versions["lightning"]).public
    env_id = f"py{'.'.join(versions['python'].split('.')[:2])}-torch{torch}-lightning{lightning}"
    assert {r["env"] for r in records} == {env_id}
    outcomes = _by_variant_cell(records)
    control = f"{env_id}-cpu-fp32"
    assert outcomes[("control-all-params-used", control)] == "ok", [
        r["exception"] for r in records if r["cell"] == control
    ]
    for record in records:
        if record["device"] == "cuda":  # no GPU on the machines that run the tests
            assert record["outcome"] == "skipped"
            assert "CPU-only build" in record["reason"] or "no CUDA device here" in record["reason"]
            assert record["provenance"]["cuda"] == "none"  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.parametrize("version", [PY, "3.9"])
def test_run_path_needs_only_a_bare_gpu_stack(tmp_path: Path, version: str) -> None:
    """A venv with only packaging, PyYAML, rich, numpy and Pillow, and the harness installed
    without its dependencies (no uv): `run --python` works there. On Python 3.9 too, from the
    checkout (requires-python says 3.10, the floor of the whole package): the oldest
    environment of matrix.yaml runs the harness inside itself that way under tox."""
    venv = tmp_path / "stack"
    uv = shutil.which("uv")
    assert uv, "uv builds the venv"
    try:
        interpreter = str(find_interpreter(version))  # how the harness finds interpreters
    except EnvFailed as exc:
        pytest.skip(str(exc))
    subprocess.run([uv, "venv", "-q", "--python", interpreter, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [uv, "pip", "install", "-q", "--python", python]
    subprocess.run([*pip, *BARE_STACK], check=True, timeout=600)
    installed = version == PY
    if installed:
        subprocess.run([*pip, "--no-deps", str(REPO)], check=True, timeout=600)
    frozen = subprocess.run(
        [uv, "pip", "freeze", "--python", python], capture_output=True, text=True, check=True
    ).stdout
    names = {re.split(r"==| @ ", line)[0].lower() for line in frozen.splitlines()}
    assert "uv" not in names and ("torch-error-harness" in names) is installed
    project = Project(tmp_path / "project")
    bare_path = f"{venv / 'bin'}:/usr/bin:/bin"  # no uv, no other Python on PATH
    out = project.run("--python", python, python=python, path=bare_path, checkout=not installed)
    assert out.returncode == 0, out.stdout + out.stderr
    counts = Counter(r["outcome"] for r in project.records())
    assert counts["reproduced"] == 2 and counts["skipped"] > 0, counts
    assert "env_failed" not in counts


def test_requirements_the_interpreter_already_meets_run_there(tmp_path: Path) -> None:
    """A variant's `requires:` in an existing interpreter: nothing is installed, so it runs
    where the interpreter already has them (the GPU box's wheel folder) and is unsupported,
    naming what is missing, where it does not."""
    project = Project(tmp_path)
    entry = project.root / "repros" / "tiny" / "faults" / "entry.yaml"
    text = entry.read_text()
    text = text.replace(
        'description: "works", claim: {ref: "workaround 1", rate: 0.9}}',
        'description: "works", claim: {ref: "workaround 1", rate: 0.9}, requires: ["packaging>=20"]}',
    )
    text = text.replace(
        'description: "a postcondition fails", claim: {ref: "workaround 2", rate: 0.8}}',
        'description: "a postcondition fails", claim: {ref: "workaround 2", rate: 0.8},'
        ' requires: ["no-such-distribution-for-the-harness>=1"]}',
    )
    entry.write_text(text)
    out = project.run("--python", sys.executable, "--variant", "ok", "--variant", "wrong")
    assert out.returncode == 0, out.stdout + out.stderr
    cpu = [r for r in project.records() if r["device"] == "cpu"]
    by = {r["variant"]: r for r in cpu}
    assert by["ok"]["outcome"] == "ok"
    assert by["ok"]["requires"] == {"packaging": "packaging>=20"}
    assert str(by["ok"]["ran_in"]).startswith(f"{STANDIN_ENV}-with-packaging-ge20")
    assert by["ok"]["versions"]["packaging"] == __import__("packaging").__version__
    assert by["wrong"]["outcome"] == "unsupported"
    assert "no-such-distribution-for-the-harness is not installed" in str(by["wrong"]["reason"])
    assert "existing interpreter" in str(by["wrong"]["reason"])


@pytest.mark.slow  # about 30 s: rounds of real extra trials
def test_settle_runs_extra_trials_for_what_is_open_and_says_what_it_settled(
    tmp_path: Path,
) -> None:
    # one trial leaves the claims inconclusive: --settle runs rounds of extra trials for
    # them, writes results/settled/<night>-m.json and says what it settled
    project = Project(tmp_path / "p")
    out = project.run("--python", sys.executable, "--profile", "cpu-fp32", "--settle", "120")
    assert out.returncode == 0, out.stdout + out.stderr
    said = re.search(r"settle: (\d+) extra runs in (\d+) round\(s\); (.+)", out.stdout)
    assert said, out.stdout
    (written,) = (project.root / "results" / "settled").glob("*-m.json")
    doc = json.loads(written.read_text())
    assert doc["machine"] == "m" and doc["rounds"] == int(said[2]) >= 1
    assert doc["extra_runs"] == int(said[1]) > 0 and doc["ended"] == said[3]
    records = project.records()
    first = len({(r["variant"], r["cell"]) for r in records})  # one trial each, first
    assert len(records) == first + doc["extra_runs"]
    for settled in doc["claims_settled"]:
        assert f"settled by extra trials: tiny/faults {settled['claim']}" in out.stdout
