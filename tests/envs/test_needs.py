"""What a variant needs beyond its cell (entry.yaml ``needs``), decided before it runs from
the environment's probe: pure functions over the facts of real environments' probes."""

from __future__ import annotations

import pytest
from packaging.version import Version

from harness.envs.capabilities import (
    RuntimeFacts,
    before_run,
    compile_python_limit,
    needs_check,
)
from harness.inenv import child
from harness.outcomes import Outcome


def probe(python: str, torch: str | None, setuptools: str | None = "69.5.1") -> dict[str, str]:
    found = {"python": python}
    if torch is not None:
        found["torch"] = torch
    if setuptools is not None:
        found["setuptools"] = setuptools
    return found


@pytest.mark.parametrize(
    ("torch", "limit"),
    [
        # each row as its torch/_dynamo/eval_frame.py says ("Python 3.X+ not yet supported")
        ("1.13.1", None),
        ("2.0.1", (3, 11)),
        ("2.1.2", (3, 12)),
        ("2.3.1", (3, 12)),
        ("2.4.1", (3, 13)),
        ("2.5.1", (3, 13)),
        ("2.6.0", (3, 14)),
        ("2.9.1", (3, 14)),
        ("2.10.0", (3, 15)),
        ("2.13.0", (3, 15)),
    ],
)
def test_the_first_python_each_torch_refuses_to_compile_on(
    torch: str, limit: tuple[int, int] | None
) -> None:
    assert compile_python_limit(Version(torch)) == limit


def test_torch_2_0_on_python_3_11_cannot_compile() -> None:
    facts = RuntimeFacts.from_probe(probe("3.11.7", "2.0.1+cu117"))
    outcome, why = needs_check(("torch.compile",), facts)  # type: ignore[misc]
    assert outcome is Outcome.UNSUPPORTED
    assert "Python 3.11+ not yet supported for torch.compile" in why and "3.11" in why
    assert needs_check(("dynamo",), facts) is not None  # the eager backend captures too
    assert needs_check((), facts) is None  # a variant that does not compile runs


def test_torch_before_2_0_has_no_compile() -> None:
    decided = needs_check(("dynamo",), RuntimeFacts.from_probe(probe("3.9.18", "1.10.2+cu102")))
    assert decided is not None and decided[0] is Outcome.UNSUPPORTED
    assert "does not exist in torch 1.10.2" in decided[1]


def test_inductor_without_setuptools_is_the_environments_failure() -> None:
    facts = RuntimeFacts.from_probe(probe("3.11.7", "2.4.1+cu121", setuptools=""))
    outcome, why = needs_check(("torch.compile",), facts)  # type: ignore[misc]
    assert outcome is Outcome.ENV_FAILED and "No module named 'setuptools'" in why
    assert needs_check(("dynamo",), facts) is None  # the eager backend builds nothing


def test_a_supported_environment_and_an_older_probe_run() -> None:
    assert (
        needs_check(("torch.compile",), RuntimeFacts.from_probe(probe("3.11.7", "2.5.1"))) is None
    )
    # a probe without the setuptools fact (written before it existed): not decided here
    older = RuntimeFacts.from_probe(probe("3.11.7", "2.4.1", setuptools=None))
    assert older.setuptools is None and needs_check(("torch.compile",), older) is None
    # a stand-in environment without torch: nothing to decide
    assert needs_check(("torch.compile",), RuntimeFacts.from_probe(probe("3.11.7", None))) is None


def test_before_run_decides_the_cell_first_then_the_needs() -> None:
    found = probe("3.11.7", "2.0.1+cpu")
    found |= {"torch_cuda": "None", "cuda_available": "False"}
    skipped = before_run("cuda", "fp32", ("torch.compile",), found)
    assert skipped is not None and skipped[0] is Outcome.SKIPPED
    unsupported = before_run("cpu", "fp32", ("torch.compile",), found)
    assert unsupported is not None and unsupported[0] is Outcome.UNSUPPORTED
    assert before_run("cpu", "fp32", (), found) is None


@pytest.mark.torch
def test_the_probe_reports_setuptools_where_it_is_installed() -> None:
    import importlib.util

    report = child.probe_report([["torch"]])
    found = report["versions"]["setuptools"]
    assert (found != "") == (importlib.util.find_spec("setuptools") is not None)


def h200(**facts: str) -> dict[str, str]:
    """The probe of the GPU box's stack: one H200, torch 2.11 (CUDA 12.8), Triton, libcudart."""
    found = probe("3.12.3", "2.11.0+cu128")
    found |= {
        "torch_cuda": "12.8",
        "cuda_available": "True",
        "compute_capability": "9.0",
        "cuda_arch_list": "sm_80 sm_90",
        "bf16_supported": "True",
        "device_count": "1",
        "triton": "yes",
        "cuda_runtime": "/usr/lib/python3/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
    }
    return found | facts


def test_a_two_device_variant_is_unsupported_on_one_gpu_with_the_reason() -> None:
    outcome, why = before_run("cuda", "fp32", ("two-gpus",), h200())  # type: ignore[misc]
    assert outcome is Outcome.UNSUPPORTED
    assert why == (
        "the variant needs two CUDA devices (needs: two-gpus); torch sees 1 here "
        "(torch.cuda.device_count())"
    )
    assert before_run("cuda", "fp32", ("two-gpus",), h200(device_count="2")) is None


def test_triton_and_the_cuda_runtime_are_decided_where_the_probe_looked() -> None:
    assert before_run("cuda", "fp32", ("triton", "cuda-runtime"), h200()) is None
    outcome, why = before_run("cuda", "fp32", ("triton",), h200(triton=""))  # type: ignore[misc]
    assert outcome is Outcome.UNSUPPORTED and "Triton is not installed here" in why
    outcome, why = before_run("cuda", "fp32", ("cuda-runtime",), h200(cuda_runtime=""))  # type: ignore[misc]
    assert outcome is Outcome.UNSUPPORTED and "mapped no libcudart" in why
    # an older probe that did not look decides nothing: the variant's own check runs
    older = {k: v for k, v in h200().items() if k not in ("triton", "cuda_runtime")}
    assert before_run("cuda", "fp32", ("triton", "cuda-runtime"), older) is None
    # a device need and a compile need: both are asked
    compile_too = before_run("cuda", "fp32", ("triton", "torch.compile"), h200(python="3.15.0"))
    assert compile_too is not None and "does not compile on Python 3.15" in compile_too[1]


def test_without_cuda_the_cell_is_skipped_before_its_device_needs() -> None:
    found = h200(torch_cuda="None", cuda_available="False", triton="", cuda_runtime="")
    decided = before_run("cuda", "fp32", ("two-gpus", "triton"), found)
    assert decided is not None and decided[0] is Outcome.SKIPPED


@pytest.mark.torch
def test_the_probe_reports_triton_and_the_cuda_runtime() -> None:
    import importlib.util

    report = child.probe_report([["torch"]])["versions"]
    assert (report["triton"] != "") == (importlib.util.find_spec("triton") is not None)
    import torch

    # a CPU build maps no libcudart; a CUDA build maps torch's own
    assert (report["cuda_runtime"] == "") == (torch.version.cuda is None)
