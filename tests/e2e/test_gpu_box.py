"""scripts/gpu-box.sh, run here on the CPU: in a copy of the project, on this interpreter
with a stand-in for torch (every CUDA cell is skipped, with the reason), and on a real torch
where the test interpreter has one (nox -s tests): the CPU-only build is the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs.backends import STANDIN_VAR
from tests.paths import REPO

SCRIPT = "scripts/gpu-box.sh"
SEEDS = "pytorch/grad-scale-unscale-error lightning/gradient-clipping-optimizer-handles-unscaling"


def copy_project(root: Path) -> Path:
    for name in ("harness", "scripts", "repros"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
    return root


def gpu_box(root: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (STANDIN_VAR, "PYTHONPATH")}
    return subprocess.run(
        ["bash", str(root / SCRIPT), str(out)],
        cwd=root,
        env={**base, "PYTHON": sys.executable, "GPU_BOX_MACHINE": "box", **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gpu_box_with_a_standin_skips_every_cuda_cell_and_leaves_one_file(
    tmp_path: Path,
) -> None:
    root = copy_project(tmp_path / "box")
    out = gpu_box(
        root, tmp_path / "out", GPU_BOX_ENTRIES=SEEDS, **{STANDIN_VAR: "packaging=={torch}"}
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "== gpu-box" in out.stdout and "bring back results/records/box.jsonl" in out.stdout
    files = sorted((root / "results" / "records").glob("*.jsonl"))
    assert [f.name for f in files] == ["box.jsonl"]
    assert (tmp_path / "out" / "box.jsonl").read_bytes() == files[0].read_bytes()
    stored = records(files[0])
    # the gpu-nightly profile: CUDA cells only, three trials each, the two seed entries
    assert stored and {r["device"] for r in stored} == {"cuda"}
    assert {r["trial"] for r in stored} == {0, 1, 2}
    assert {str(r["entry"]).split("/")[0] for r in stored} == {"pytorch", "lightning"}
    assert {r["outcome"] for r in stored} == {"skipped"}
    assert {r["reason"] for r in stored} == {
        "no CUDA here: torch was not imported (a stand-in environment)"
    }
    assert f"{len(stored)} x no CUDA here" in out.stdout
    again = gpu_box(
        root, tmp_path / "out", GPU_BOX_ENTRIES=SEEDS, **{STANDIN_VAR: "packaging=={torch}"}
    )
    assert again.returncode == 0 and "0 to run" in again.stdout  # a second call resumes
    assert len(records(files[0])) == len(stored)


@pytest.mark.slow
@pytest.mark.torch
def test_gpu_box_on_a_real_cpu_torch_says_why_cuda_cells_are_skipped(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    pytest.importorskip("lightning", reason="needs lightning in the test interpreter")
    import torch

    root = copy_project(tmp_path / "box")
    out = gpu_box(root, tmp_path / "out", GPU_BOX_ENTRIES="pytorch/*")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    stored = records(root / "results" / "records" / "box.jsonl")
    assert stored and {r["outcome"] for r in stored} == {"skipped"}
    reasons = {str(r["reason"]) for r in stored}
    # each child imported repro.py and found its variant before it skipped the cell
    checked = "; repro.py imported and its variant found, not run"
    if torch.version.cuda is None:
        assert reasons == {
            f"no CUDA here: torch {torch.__version__} is a CPU-only build "
            f"(torch.version.cuda is None){checked}"
        }
    else:
        assert all(r.startswith("no CUDA device here") and checked in r for r in reasons)
    assert {r["versions"]["torch"] for r in stored} == {torch.__version__}  # type: ignore[index]


def tiny_wheel(folder: Path, name: str = "harness_wheel_probe", version: str = "1.0") -> Path:
    """A pure-Python wheel made here (one module): what scripts/gpu-wheels.sh would bring."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name}-{version}"
    files = {
        f"{name}.py": "VALUE = 1\n",
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
        ),
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    lines.append(f"{dist}.dist-info/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}.dist-info/RECORD", "\n".join(lines) + "\n")
    (folder / "requirements.txt").write_text(f"{name.replace('_', '-')}=={version}\n")
    return wheel


def entry_requiring(root: Path, requirement: str) -> str:
    """The tiny test entry in the copy, every variant requiring ``requirement``."""
    target = root / "repros" / "tiny" / "faults"
    shutil.copytree(REPO / "tests" / "resources" / "entries" / "tiny" / "faults", target)
    text = (target / "entry.yaml").read_text()
    (target / "entry.yaml").write_text(
        text.replace("claims:", f'requires: ["{requirement}"]\nclaims:', 1)
    )
    return "tiny/faults"


def test_the_wheel_folder_is_installed_offline_and_meets_the_requirements(tmp_path: Path) -> None:
    """A variant's requirements on the GPU box: the wheels brought with the checkout are
    installed (pip, no index) into .gpu-box/venv, over the interpreter's own packages; the
    variants run there (here: skipped, no CUDA) with what was installed in their records.
    Without the folder they are unsupported, naming what is missing."""
    standin = {STANDIN_VAR: "packaging=={torch}"}
    root = copy_project(tmp_path / "box")
    entry = entry_requiring(root, "harness-wheel-probe==1.0")
    tiny_wheel(root / ".gpu-box" / "wheels")
    out = gpu_box(root, tmp_path / "out", GPU_BOX_ENTRIES=entry, **standin)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 packages of .gpu-box/wheels installed in .gpu-box/venv" in out.stdout
    stored = records(root / "results" / "records" / "box.jsonl")
    assert stored and {r["outcome"] for r in stored} == {"skipped"}
    assert {r["reason"] for r in stored} == {
        "no CUDA here: torch was not imported (a stand-in environment)"
    }
    assert all(r["versions"]["harness-wheel-probe"] == "1.0" for r in stored)
    assert all(r["requires"] == {"harness-wheel-probe": "harness-wheel-probe==1.0"} for r in stored)

    bare = copy_project(tmp_path / "bare")
    entry_requiring(bare, "harness-wheel-probe==1.0")
    out = gpu_box(bare, tmp_path / "out2", GPU_BOX_ENTRIES=entry, **standin)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    missing = records(bare / "results" / "records" / "box.jsonl")
    assert missing and {r["outcome"] for r in missing} == {"unsupported"}
    assert all("harness-wheel-probe is not installed" in str(r["reason"]) for r in missing)


@pytest.mark.parametrize(
    ("python", "said"),
    [
        ("/nonexistent/python3", "is not a Python that runs"),
        ("/bin/true", "is not a Python that runs"),
    ],
)
def test_gpu_box_says_in_one_line_what_its_python_is_not(
    tmp_path: Path, python: str, said: str
) -> None:
    """Issue 36, item 9: a PYTHON that is not a Python ended in exit 127 and a confusing
    banner; one without the harness's packages in a traceback."""
    root = copy_project(tmp_path / "p")
    done = gpu_box(root, tmp_path / "out", PYTHON=python)
    assert done.returncode == 2
    assert done.stdout.strip().count("\n") == 0 and said in done.stdout, done.stdout


def test_gpu_box_names_the_packages_its_python_lacks(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    root = copy_project(tmp_path / "p")
    done = gpu_box(root, tmp_path / "out", PYTHON=str(bare / "bin" / "python"))
    assert done.returncode == 2
    assert "lacks torch lightning packaging yaml rich" in done.stdout, done.stdout
