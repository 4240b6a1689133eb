"""The shared reproducer helpers (repros/reprokit.py) and the postconditions of the seed
reproducers: every postcondition is made to fail for real, on the torch of the test
interpreter (`nox -s tests` installs torch 2.13.0 and lightning 2.6.6); nothing is mocked."""

from __future__ import annotations

import ast
import importlib.util
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.inenv.child import classify
from tests.paths import REPO

KIT = REPO / "repros" / "reprokit.py"
GRAD = REPO / "repros" / "pytorch" / "grad-scale-unscale-error" / "repro.py"
CLIP = REPO / "repros" / "lightning" / "gradient-clipping-optimizer-handles-unscaling" / "repro.py"
LOSS_NAN = REPO / "repros" / "deadends" / "pytorch" / "loss-nan" / "pt2-linux" / "repro.py"


@pytest.mark.parametrize(
    "path", [KIT, *sorted((REPO / "repros").rglob("repro.py"))], ids=lambda p: p.parent.name
)
def test_reproducer_code_parses_as_python_3_7(path: Path) -> None:
    # target environments go down to Python 3.7/3.9: no newer syntax in what runs there
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 7))


def _load(path: Path, name: str) -> ModuleType:
    """A reproducer as a module of its own (repros/ on sys.path for its `from reprokit`)."""
    if str(KIT.parent) not in sys.path:
        sys.path.insert(0, str(KIT.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kit() -> ModuleType:
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    return _load(KIT, "reprokit_under_test")


@pytest.mark.torch
def test_each_postcondition_helper_can_fail(kit: ModuleType) -> None:
    import torch

    assert kit.finite([1.0, 2.0])["ok"]
    assert not kit.finite([1.0, math.nan])["ok"]
    assert not kit.finite([])["ok"]  # nothing recorded is not a pass
    a = {"w": torch.zeros(3)}
    assert kit.moved(a, {"w": torch.ones(3)})["ok"]
    still = kit.moved(a, {"w": torch.zeros(3)})
    assert not still["ok"] and "unchanged: ['w']" in still["detail"]
    assert not kit.moved({}, {})["ok"]
    assert kit.at_most([0.4, 0.5], 0.5, "norm")["ok"]
    assert not kit.at_most([0.4, 0.6], 0.5, "norm")["ok"]
    assert not kit.at_most([], 0.5, "norm")["ok"]
    assert kit.above([0.6], 0.5, "norm")["ok"]
    assert not kit.above([0.6, 0.5], 0.5, "norm")["ok"]
    assert not kit.above([], 0.5, "norm")["ok"]


@pytest.mark.torch
def test_capability_checks_raise_unsupported_not_other_errors(kit: ModuleType) -> None:
    import torch

    assert kit.autocast_dtype("cpu", "fp32") is None
    assert kit.autocast_dtype("cpu", "bf16") == torch.bfloat16
    scaler, api = kit.make_scaler("cpu")  # torch 2.3 and later scale CPU tensors
    assert scaler.is_enabled() and api == "torch.amp.GradScaler('cpu')"
    with pytest.raises(kit.Unsupported, match=r"torch.autocast\('meta', .* is not available"):
        kit.autocast_dtype("meta", "bf16")


@pytest.mark.torch
def test_a_capped_card_without_cuda_is_unsupported_before_anything_runs(kit: ModuleType) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    ran = []
    with pytest.raises(kit.Unsupported, match="needs a CUDA device"):
        kit.on_capped_card(lambda: ran.append("measure"), lambda card: ran.append(card), 1.4)
    assert ran == []


@pytest.mark.torch
def test_transformers_classes_or_unsupported(
    kit: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    (config,) = kit.from_transformers("GPT2Config")
    assert config.__name__ == "GPT2Config"
    monkeypatch.setitem(sys.modules, "transformers", None)  # as where it is not installed
    with pytest.raises(kit.Unsupported, match="transformers does not import here"):
        kit.from_transformers("GPT2Config")


@pytest.mark.torch
def test_lightning_16_mixed_on_cpu_is_unsupported_before_the_run(kit: ModuleType) -> None:
    lf = pytest.importorskip("lightning.fabric")
    fabric = lf.Fabric(accelerator="cpu", devices=1, precision="16-mixed")
    with pytest.raises(kit.Unsupported, match="asked for '16-mixed'; Lightning runs .*bf16-mixed"):
        kit.require_plugin_precision(fabric.strategy.precision, "fp16", "Fabric(...)")
    kit.require_plugin_precision(fabric.strategy.precision, "bf16", "Fabric(...)")


def _lightning_before_2(flag: int | str) -> str:
    """What Lightning 1.8 does with a precision flag: only the short spellings are valid
    (its AcceleratorConnector raises MisconfigurationException with this message), and of
    those only the numbers and 'bf16' pick a plugin ('16' ends in "No precision set")."""
    allowed = ("16", "32", "64", "bf16")
    if str(flag) not in allowed:
        raise ValueError(f"Precision {flag!r} is invalid. Allowed precision values: {allowed}")
    if flag not in (16, 32, 64, "bf16"):
        raise RuntimeError("No precision set")
    return f"built with {flag!r}"


@pytest.mark.torch
def test_the_precision_is_spelt_as_the_installed_lightning_takes_it(kit: ModuleType) -> None:
    # Lightning 2 (installed here) takes its own spelling at once
    lp = pytest.importorskip("lightning.pytorch")
    trainer, flag = kit.with_lightning_precision(
        lambda f: lp.Trainer(accelerator="cpu", devices=1, precision=f, logger=False), "bf16"
    )
    assert flag == "bf16-mixed"
    kit.require_plugin_precision(trainer.strategy.precision_plugin, "bf16", "Trainer", flag)
    # a Lightning that refuses '16-mixed' as invalid gets '16'
    assert kit.with_lightning_precision(_lightning_before_2, "fp16") == ("built with 16", 16)
    assert kit.with_lightning_precision(_lightning_before_2, "fp32") == ("built with 32", 32)
    assert kit.with_lightning_precision(_lightning_before_2, "bf16") == (
        "built with 'bf16'",
        "bf16",
    )

    # another error propagates as it is, and so does the refusal if '16' fails too
    def no_device(flag: str) -> str:
        raise RuntimeError(f"no such device for {flag}")

    with pytest.raises(RuntimeError, match="no such device for 16-mixed"):
        kit.with_lightning_precision(no_device, "fp16")

    def refuses_both(flag: str) -> str:
        raise ValueError(f"Precision {flag!r} is invalid")

    with pytest.raises(ValueError, match="Precision '16-mixed' is invalid"):
        kit.with_lightning_precision(refuses_both, "fp16")


@pytest.mark.torch
def test_the_short_spelling_is_checked_like_the_long_one(kit: ModuleType) -> None:
    # Lightning 2 reads '16'/'bf16' as aliases; on CPU '16' runs bf16, which is not what fp16 asks
    lf = pytest.importorskip("lightning.fabric")
    fabric = lf.Fabric(accelerator="cpu", devices=1, precision="bf16")
    kit.require_plugin_precision(fabric.strategy.precision, "bf16", "Fabric(...)", "bf16")
    fabric = lf.Fabric(accelerator="cpu", devices=1, precision=16)
    with pytest.raises(kit.Unsupported, match="asked for 16; Lightning runs .*bf16"):
        kit.require_plugin_precision(fabric.strategy.precision, "fp16", "Fabric(...)", 16)


# -- the seed reproducers' own postconditions, each made to fail by a real change -----------


def _outcome(module: ModuleType, variant: str, precision: str) -> tuple[str, dict]:
    checks = module.VARIANTS[variant]("cpu", precision)
    return classify(None, checks, None)["outcome"], checks


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "value", "failing"),
    [
        ("LR", 0.0, "trained_params_moved"),  # nothing moves
        ("LR", math.inf, "loss_finite"),  # the weights blow up
    ],
)
def test_grad_scale_postconditions_fail(
    monkeypatch: pytest.MonkeyPatch, setting: str, value: float, failing: str
) -> None:
    pytest.importorskip("torch")
    repro = _load(GRAD, "grad_repro_under_test")
    assert _outcome(repro, "control-all-params-used", "bf16")[0] == "ok"
    monkeypatch.setattr(repro, setting, value)
    outcome, checks = _outcome(repro, "control-all-params-used", "bf16")
    assert outcome == "wrong_result" and not checks[failing]["ok"], checks


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "setting", "value", "failing"),
    [
        ("control-plain-clip", "LR", 0.0, "params_moved"),
        ("solution3-no-clipping", "LR", math.inf, "loss_finite"),
        ("control-plain-clip", "CLIP", 100.0, "clip_binds"),  # a clip that never binds
        (
            "example-fix-helpers",
            "clipping_supported",
            lambda plugin, opt: True,
            "helpers_right_on_fused_optimizer",
        ),
    ],
)
def test_gradient_clipping_postconditions_fail(
    monkeypatch: pytest.MonkeyPatch, variant: str, setting: str, value: object, failing: str
) -> None:
    pytest.importorskip("lightning")
    repro = _load(CLIP, "clip_repro_under_test")
    monkeypatch.setattr(repro, setting, value)
    outcome, checks = _outcome(repro, variant, "fp16")
    assert outcome == "wrong_result" and not checks[failing]["ok"], checks


def _two_bad_rows(original):
    def data(device, nan):
        x, y = original(device, nan)
        if nan:
            x[7, 0] = float("nan")  # a second bad row the check must find too
        return x, y

    return data


def _one_nan_weight(original):
    def network(batchnorm=True):
        import torch

        net = original(batchnorm)
        with torch.no_grad():
            net[-1].bias.fill_(float("nan"))  # the weights are lost before training
        return net

    return network


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "setting", "value", "failing"),
    [
        ("control-stable-lr", "LR_OK", 1.0, ("loss_finite", "fits_the_data", "weights_finite")),
        ("control-stable-lr", "STEPS", 1, ("fits_the_data",)),  # one step fits nothing
        ("workaround1-check-data", "data", _two_bad_rows, ("found_the_bad_rows",)),
        (
            "workaround2-sensible-diagnose",
            "LR_HIGH",
            0.01,  # nothing goes wrong: no anomaly to report
            ("anomaly_reported", "stopped_at_the_first_bad_step"),
        ),
        (
            "workaround2-sensible-diagnose",
            "network",
            _one_nan_weight,
            ("weights_finite_when_stopped",),
        ),
    ],
)
def test_loss_nan_postconditions_fail(
    monkeypatch: pytest.MonkeyPatch,
    variant: str,
    setting: str,
    value: object,
    failing: tuple[str, ...],
) -> None:
    pytest.importorskip("torch")
    repro = _load(LOSS_NAN, "loss_nan_repro_under_test")
    assert _outcome(repro, variant, "fp32")[0] == "ok"
    if callable(value):
        value = value(getattr(repro, setting))
    monkeypatch.setattr(repro, setting, value)
    outcome, checks = _outcome(repro, variant, "fp32")
    assert outcome == "wrong_result", checks
    assert {n for n, c in checks.items() if not c["ok"]} >= set(failing), checks


def test_no_module_beside_child_or_reprokit_shadows_the_standard_library() -> None:
    # harness/ (beside child.py) and repros/ (beside reprokit.py) go first on sys.path in
    # target environments: a harness/bisect.py once broke `import tempfile` (random imports
    # bisect) in every environment health check
    for folder in (REPO / "harness", REPO / "repros"):
        clashes = [p.name for p in folder.glob("*.py") if p.stem in sys.stdlib_module_names]
        assert not clashes, f"{folder}: {clashes} shadow standard-library modules"


# -- running a reproducer by hand: python repros/reprokit.py ENTRY ---------------------------

HAND_YAML = """\
id: demo/hand
signature: {type: RuntimeError, message: "demo boom"}
variants:
  - {name: baseline, kind: baseline, description: "raises the demo error"}
  - {name: fp32-only, kind: workaround, description: "defined at fp32", precisions: [fp32]}
  - {name: todo, kind: dead_end, description: "not written yet"}
  - {name: control, kind: control, description: "works"}
"""
HAND_REPRO = '''"""A torch-free reproducer run by hand."""

from reprokit import Unsupported


def baseline(device, precision):
    raise RuntimeError("demo boom")


def fp32_only(device, precision):
    return {"precision": {"ok": precision == "fp32", "detail": precision}}


def control(device, precision):
    if device == "cuda":
        raise Unsupported("no CUDA in this demo")
    return {"ran": {"ok": True, "detail": "on %s at %s" % (device, precision)}}


VARIANTS = {"baseline": baseline, "fp32-only": fp32_only, "todo": None, "control": control}
'''


def _by_hand(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(cwd / "repros" / "reprokit.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_reproducer_runs_by_hand_with_entry_yamls_descriptions_and_limits(
    tmp_path: Path,
) -> None:
    pytest.importorskip("yaml")
    entry = tmp_path / "repros" / "demo" / "hand"
    entry.mkdir(parents=True)
    (tmp_path / "repros" / "reprokit.py").write_text(KIT.read_text())
    (entry / "entry.yaml").write_text(HAND_YAML)
    (entry / "repro.py").write_text(HAND_REPRO)
    listed = _by_hand("demo/hand", "--list", cwd=tmp_path)  # an id under repros/
    assert listed.returncode == 0, listed.stderr
    assert "raises the demo error" in listed.stdout and "todo" in listed.stdout
    assert "not written yet  (not written)" in listed.stdout
    first = _by_hand("repros/demo/hand", cwd=tmp_path)  # a folder; the first variant
    assert first.returncode == 1 and "RAISED RuntimeError: demo boom" in first.stdout
    own = _by_hand(str(entry / "repro.py"), "--variant", "fp32-only", cwd=tmp_path)
    assert own.returncode == 0 and "variant fp32-only, cpu, fp32" in own.stdout  # its own precision
    outside = _by_hand("demo/hand", "--variant", "fp32-only", "--precision", "fp16", cwd=tmp_path)
    assert outside.returncode == 2 and "entry.yaml runs fp32-only on precisions" in outside.stdout
    todo = _by_hand("demo/hand", "--variant", "todo", cwd=tmp_path)
    assert todo.returncode == 4 and "NOT WRITTEN" in todo.stdout
    cuda = _by_hand("demo/hand", "--variant", "control", "--device", "cuda", cwd=tmp_path)
    assert cuda.returncode == 2 and "UNSUPPORTED: no CUDA in this demo" in cuda.stdout
    ok = _by_hand("demo/hand", "--variant", "control", cwd=tmp_path)
    assert ok.returncode == 0 and "on cpu at fp16" in ok.stdout


def test_time_left_is_the_job_s_deadline_less_a_margin_and_never_more_than_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    time_left = _load(KIT, "reprokit_limits").time_left
    monkeypatch.delenv("HARNESS_JOB_DEADLINE", raising=False)
    assert time_left(240) == 240  # by hand: the reproducer's own figure
    monkeypatch.setenv("HARNESS_JOB_DEADLINE", repr(time.time() + 100))
    assert 80 < time_left(240) <= 85  # 100 s left, less the 15 s margin
    assert time_left(30) == 30  # never longer than the reproducer's own figure
    monkeypatch.setenv("HARNESS_JOB_DEADLINE", repr(time.time() - 5))
    assert time_left(240) == 1.0  # past it: the least wait, so that the error is named
    monkeypatch.setenv("HARNESS_JOB_DEADLINE", "soon")
    assert time_left(240) == 240


def test_host_memory_mb_is_the_job_s_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    host_memory_mb = _load(KIT, "reprokit_limits").host_memory_mb

    monkeypatch.delenv("HARNESS_MEMORY_LIMIT_MB", raising=False)
    assert host_memory_mb() is None and host_memory_mb(512) == 512
    monkeypatch.setenv("HARNESS_MEMORY_LIMIT_MB", "8192")
    assert host_memory_mb() == 8192
