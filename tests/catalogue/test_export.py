"""`harness export`: the reproducer with its helpers inlined runs on its own, away from the
repository (a torch-free demo entry always; the seed reproducer on the test interpreter's
torch where `nox -s tests` installed it)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import main
from tests.paths import REPO

DEMO_YAML = """\
id: demo/err
signature: {type: RuntimeError, message: "demo boom"}
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - {name: wrong, kind: workaround, description: "a postcondition fails", precisions: [bf16]}
  - {name: todo, kind: dead_end, description: "not written"}
  - {name: control, kind: control, description: "works"}
"""
DEMO_REPRO = '''"""Demo reproducer (no torch)."""

from __future__ import annotations

import sys
from pathlib import Path

# reprokit:begin
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, finite, main  # noqa: E402

# reprokit:end

VARIANTS = {"baseline": "raises", "wrong": "fails", "todo": "later", "control": "works"}
NOT_WRITTEN = ["todo"]


def run(variant, device="cpu", precision="fp32"):
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if variant == "baseline":
        raise RuntimeError("demo boom")
    losses = [1.0, float("nan")] if variant == "wrong" else [1.0, 0.5]
    return {"loss_finite": finite(losses), "precision": {"ok": True, "detail": precision}}


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN))
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    entry = root / "repros" / "demo" / "err"
    entry.mkdir(parents=True)
    shutil.copy(REPO / "repros" / "reprokit.py", root / "repros")
    (entry / "entry.yaml").write_text(DEMO_YAML)
    (entry / "repro.py").write_text(DEMO_REPRO)
    for name in ("source.md", "document.md"):
        (entry / name).write_text("x\n")
    return root


def _export(root: Path, entry: str, variant: str, out: Path) -> Path:
    assert main(["--repo", str(root), "export", entry, "--variant", variant, "-o", str(out)]) == 0
    return out


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", str(script), *args],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_exported_script_runs_alone_and_defaults_to_its_variant(
    project: Path, tmp_path: Path
) -> None:
    away = tmp_path / "elsewhere"  # no reprokit.py above it
    away.mkdir()
    script = _export(project, "demo/err", "wrong", away / "bug.py")
    text = script.read_text()
    assert "import reprokit" not in text and "from reprokit" not in text
    ast.parse(text, feature_version=(3, 7))
    wrong = _run(script)
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    assert "variant wrong, cpu, bf16" in wrong.stdout  # the variant's own precision
    assert "loss_finite" in wrong.stdout and "FAIL" in wrong.stdout
    baseline = _run(script, "--variant", "baseline")
    assert baseline.returncode == 1 and "RAISED RuntimeError: demo boom" in baseline.stdout
    control = _run(script, "--variant", "control")
    assert control.returncode == 0, control.stdout + control.stderr
    todo = _run(script, "--variant", "todo")
    assert todo.returncode == 4 and "NOT WRITTEN" in todo.stdout


@pytest.mark.parametrize(
    ("variant", "message"),
    [("nope", "has no variant 'nope'"), ("todo", "is not written yet")],
)
def test_export_refuses_what_it_cannot_export(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str, message: str
) -> None:
    args = ["--repo", str(project), "export", "demo/err", "--variant", variant]
    assert main(args) == 2
    assert message in capsys.readouterr().out


def test_export_needs_the_marked_import_block(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repro = project / "repros" / "demo" / "err" / "repro.py"
    repro.write_text(repro.read_text().replace("# reprokit:begin\n", ""))
    assert main(["--repo", str(project), "export", "demo/err", "--variant", "control"]) == 2
    assert "no '# reprokit:begin' ... '# reprokit:end' block" in capsys.readouterr().out


def test_every_written_reproducer_exports_to_valid_python() -> None:
    # a reproducer's main(...) may set its own defaults (default_precision="fp32"): the
    # export's replace them instead of repeating the keyword
    from harness.catalogue.export import export_script
    from harness.spec.entries import load_entries

    kit = REPO / "repros" / "reprokit.py"
    exported = 0
    for entry in load_entries(REPO / "repros"):
        variant = next(v for v in entry.variants if v.written)
        script = export_script(entry, variant.name, kit)
        tree = ast.parse(script, f"{entry.id} exported")
        [call] = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "main"
        ]
        defaults = {
            k.arg: ast.literal_eval(k.value)
            for k in call.keywords
            if k.arg in ("default_variant", "default_precision")
        }
        assert defaults["default_variant"] == variant.name, entry.id
        assert defaults["default_precision"] in variant.precisions, entry.id
        exported += 1
    assert exported >= 30


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "code", "said"),
    [
        ("control-all-params-used", 0, "trained_params_moved  ok"),
        ("deadend2-unscale-twice", 1, "RAISED RuntimeError: unscale_() has already been called"),
    ],
)
def test_the_exported_seed_reproducer_runs_on_real_torch(
    tmp_path: Path, variant: str, code: int, said: str
) -> None:
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    script = _export(REPO, "pytorch/grad-scale-unscale-error", variant, tmp_path / "bug.py")
    done = _run(script, "--precision", "bf16")
    assert done.returncode == code and said in done.stdout, done.stdout + done.stderr
