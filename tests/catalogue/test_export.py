"""`harness export`: one variant and only the helpers it calls, as a script that runs on its
own away from the repository (a torch-free demo entry always; the seed reproducer on the test
interpreter's torch where `nox -s tests` installed it); and every written variant of every
entry exports to a script whose every global name is defined."""

from __future__ import annotations

import ast
import builtins
import shutil
import subprocess
import symtable
import sys
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.catalogue.export import export_script
from harness.spec.entries import load_entries, load_entry
from tests.paths import REPO

KIT = REPO / "repros" / "reprokit.py"
GRAD = "pytorch/grad-scale-unscale-error"
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

import os
import sys

from reprokit import finite, moved

os.environ["DEMO_SIDE_EFFECT"] = "kept"  # binds no name: every export keeps it
UNUSED = sys.maxsize  # no exported variant uses it


def losses_check(losses, precision):
    return {"loss_finite": finite(losses), "precision": {"ok": True, "detail": precision}}


def baseline(device, precision):
    raise RuntimeError("demo boom")


def wrong(device, precision):
    return losses_check([1.0, float("nan")], precision)


def control(device, precision):
    checks = losses_check([1.0, 0.5], precision)
    checks["side_effect"] = {"ok": os.environ.get("DEMO_SIDE_EFFECT") == "kept", "detail": ""}
    return checks


def only_for_moved(device, precision):
    return {"moved": moved({}, {})}


VARIANTS = {"baseline": baseline, "wrong": wrong, "todo": None, "control": control}
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    entry = root / "repros" / "demo" / "err"
    entry.mkdir(parents=True)
    shutil.copy(KIT, root / "repros")
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


def _defined(text: str) -> set[str]:
    return {
        n.name if isinstance(n, ast.FunctionDef | ast.ClassDef) else ""
        for n in ast.parse(text).body
    }


def _undefined_globals(text: str) -> set[str]:
    """The global names the script uses and neither defines nor gets from builtins."""
    top = symtable.symtable(text, "exported", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}

    def used(table: symtable.SymbolTable) -> set[str]:
        names = {
            s.get_name()
            for s in table.get_symbols()
            if s.is_referenced() and (s.is_global() or table is top)
        }
        for child in table.get_children():
            names |= used(child)
        return names

    return used(top) - bound - set(dir(builtins)) - {"__file__"}


def test_an_exported_script_runs_alone_with_its_variant_only(project: Path, tmp_path: Path) -> None:
    away = tmp_path / "elsewhere"  # no reprokit.py above it
    away.mkdir()
    script = _export(project, "demo/err", "wrong", away / "bug.py")
    text = script.read_text()
    assert "reprokit" not in text.replace("repros/reprokit.py", "")
    ast.parse(text, feature_version=(3, 7))
    # the variant and what it calls; not the other variants, not the helpers only they use
    assert {"wrong", "losses_check", "finite", "report"} <= _defined(text)
    assert not {"baseline", "control", "only_for_moved", "moved", "autocast"} & _defined(text)
    assert "UNUSED" not in text and 'os.environ["DEMO_SIDE_EFFECT"] = "kept"' in text
    assert "a postcondition fails" in text  # entry.yaml's description, in the docstring
    wrong = _run(script)
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    assert "wrong, cpu, bf16" in wrong.stdout  # the variant's own precision
    assert "loss_finite" in wrong.stdout and "FAIL" in wrong.stdout
    assert _run(script, "--precision", "fp16").returncode == 2  # not one of its precisions
    baseline = _run(_export(project, "demo/err", "baseline", away / "baseline.py"))
    assert baseline.returncode == 1  # the traceback a bug report wants
    assert "RuntimeError: demo boom" in baseline.stderr and "Traceback" in baseline.stderr
    control = _run(_export(project, "demo/err", "control", away / "control.py"))
    assert control.returncode == 0, control.stdout + control.stderr
    assert "side_effect" in control.stdout


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


def test_the_grad_scaler_baseline_is_a_short_bug_report() -> None:
    entry = load_entry(REPO / "repros" / GRAD, REPO / "repros")
    text = export_script(entry, "baseline-unused-submodule", KIT)
    lines = len(text.splitlines())
    # was 447 with every variant and all of reprokit inlined
    assert lines <= 160, lines
    assert {"baseline_unused_submodule", "train", "Net", "make_scaler"} <= _defined(text)
    assert not {"deadend2_unscale_twice", "AuxUnderNoGrad", "import_lightning"} & _defined(text)


def test_every_written_variant_exports_to_a_script_with_every_name_defined() -> None:
    exported = 0
    for entry in load_entries(REPO / "repros"):
        for variant in (v for v in entry.variants if v.written):
            text = export_script(entry, variant.name, KIT)
            ast.parse(text, f"{entry.id}::{variant.name} exported", feature_version=(3, 7))
            assert not _undefined_globals(text), (entry.id, variant.name)
            main_block = text[text.index('if __name__ == "__main__":') :]
            assert f'default="{variant.devices[0]}"' in main_block, (entry.id, variant.name)
            exported += 1
    assert exported >= 270


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "code", "said"),
    [
        ("baseline-unused-submodule", 0, "trained_params_moved  ok"),
        ("control-all-params-used", 0, "trained_params_moved  ok"),
        ("deadend2-unscale-twice", 1, "RuntimeError: unscale_() has already been called"),
    ],
)
def test_the_exported_seed_reproducer_runs_on_real_torch(
    tmp_path: Path, variant: str, code: int, said: str
) -> None:
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    script = _export(REPO, GRAD, variant, tmp_path / "bug.py")
    done = _run(script, "--precision", "bf16")
    assert done.returncode == code and said in done.stdout + done.stderr, done.stdout + done.stderr


def test_an_exported_version_advice_says_what_to_install() -> None:
    from harness.catalogue.export import export_script
    from harness.spec.entries import load_entry

    entry = load_entry(
        REPO / "repros" / "lightning" / "training-epoch-end-removed", REPO / "repros"
    )
    kit = REPO / "repros" / "reprokit.py"
    text = export_script(entry, "workaround2-pin-pytorch-lightning", kit)
    assert "Install first: pip install 'pytorch-lightning<2.0'" in text
    assert "Install first" not in export_script(entry, "workaround1-on-train-epoch-end", kit)


def test_a_source_is_read_each_time_and_parsed_once_per_text(tmp_path: Path) -> None:
    from harness.catalogue.export import _Module

    source = tmp_path / "reprokit.py"
    source.write_text("def helper():\n    return 1\n")
    first = _Module.read(source)
    assert _Module.read(source) is first  # the same text: parsed once
    source.write_text("def helper():\n    return 1\n\n\ndef other():\n    return helper()\n")
    assert set(_Module.read(source).binds) == {"helper", "other"}  # an edit is seen
