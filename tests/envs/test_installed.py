"""harness/envs/installed.py: whether an existing interpreter already satisfies a
variant's requirements (specifiers, extras one level down, markers for that interpreter)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.envs.installed import judge, report

LINUX_312 = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"}


def found(**dists: tuple[str, list[str]]) -> dict:
    return {
        "dists": {
            name: {"name": name, "version": v, "requires": r} for name, (v, r) in dists.items()
        },
        "environment": LINUX_312,
    }


TRANSFORMERS = (
    "5.24.0",
    [
        "numpy>=1.17",
        'torch>=2.2; extra == "torch"',
        'accelerate>=1.1.0; extra == "torch"',
        'onnxruntime; extra == "onnx"',
        'tensorflow; python_version < "3.0" and extra == "torch"',
    ],
)


def test_met_with_the_extras_own_packages() -> None:
    met = judge(
        ("transformers[torch]",),
        found(transformers=TRANSFORMERS, torch=("2.11.0", []), accelerate=("1.2.0", [])),
    )
    assert met.ok and met.versions == {
        "transformers": "5.24.0",
        "torch": "2.11.0",
        "accelerate": "1.2.0",
    }


def test_an_extras_package_missing_is_named_with_the_extra() -> None:
    met = judge(("transformers[torch]",), found(transformers=TRANSFORMERS, torch=("2.11.0", [])))
    # numpy is transformers' own requirement, not the extra's: not asked for; onnxruntime
    # belongs to another extra; tensorflow's marker is false on Python 3.12
    assert met.unmet == ("accelerate is not installed (for transformers[torch])",)


def test_a_version_outside_the_specifier_and_a_missing_package() -> None:
    met = judge(("onnx>=1.13", "safetensors"), found(onnx=("1.12.0", [])))
    assert met.unmet == ("onnx 1.12.0 is installed, not >=1.13", "safetensors is not installed")
    assert not met.ok


def test_names_are_compared_canonically_and_markers_skip_a_requirement() -> None:
    met = judge(("PyYAML>=6", 'tomli; python_version < "3.11"'), found(pyyaml=("6.0.2", [])))
    assert met.ok and met.versions == {"pyyaml": "6.0.2"}


def test_a_real_interpreter_reports_what_it_has() -> None:
    listed = report(Path(sys.executable))
    assert "packaging" in listed["dists"]
    assert listed["environment"]["python_version"] == "{}.{}".format(*sys.version_info[:2])
    assert judge(("packaging>=20",), listed).ok
    assert judge(("no-such-distribution-for-the-harness",), listed).unmet == (
        "no-such-distribution-for-the-harness is not installed",
    )


def test_an_interpreter_that_does_not_run_is_said(tmp_path: Path) -> None:
    with pytest.raises((ValueError, OSError)):
        report(tmp_path / "no-python")
