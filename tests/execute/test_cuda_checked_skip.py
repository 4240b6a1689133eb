"""A CUDA cell on a machine without CUDA: the child still imports the reproducer, finds the
variant and reads its body for undefined names before it records ``skipped``, so that a typo
in a CUDA-only variant shows here, not in the GPU window; and the warm worker that forks
the children never initialises CUDA itself."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from harness.envs.backends import CHILD
from harness.execute.plan import Job
from harness.execute.runner import run_job
from harness.execute.warm import WarmWorker
from harness.spec.matrix import Cell

PROV = {"host": "test"}
NO_CUDA = "no CUDA here: a test machine"

REPRO = """
import json


def _helper():
    return json.dumps({})


def baseline(device, precision):
    raise RuntimeError("never run on a skipped cell")


def cuda_only(device, precision):
    _helper()
    return {}


def cuda_typo(device, precision):
    x = _helper()
    return {"ok": {"ok": bool(mispelled_name(x)), "detail": ""}}


def typo_in_helper(device, precision):
    return _broken_helper()


def _broken_helper():
    return jsonn.dumps({})


COUNTER = 0


def assigns_global(device, precision):
    global LATER
    LATER = 1
    return {"later": {"ok": LATER == 1, "detail": ""}}


VARIANTS = {
    "baseline": baseline,
    "cuda-only": cuda_only,
    "cuda-typo": cuda_typo,
    "typo-in-helper": typo_in_helper,
    "assigns-global": assigns_global,
    "not-written": None,
}
"""


def entry_with(tiny_entry, tmp_path: Path, source: str):
    repro = tmp_path / "repro.py"
    repro.write_text(source)
    return dataclasses.replace(tiny_entry, repro=repro)


def skip_job(entry, host_env, name: str, worker: WarmWorker | None):
    variant = dataclasses.replace(entry.variants[0], name=name, kind="workaround")
    job = Job(entry, variant, Cell(host_env.env, "cuda", "fp32"), 0)
    return run_job(
        job,
        host_env,
        timeout_s=60,
        memory_limit_mb=0,
        provenance=PROV,
        worker=worker,
        skip=NO_CUDA,
    )


def test_a_variant_that_imports_and_resolves_is_skipped_without_running(
    tiny_entry, host_env, tmp_path, worker
) -> None:
    entry = entry_with(tiny_entry, tmp_path, REPRO)
    for name in ("baseline", "cuda-only", "assigns-global"):
        r = skip_job(entry, host_env, name, worker)
        assert r.outcome.value == "skipped", (name, r.reason, r.exception)
        assert r.reason == f"{NO_CUDA}; repro.py imported and its variant found, not run"
    r = skip_job(entry, host_env, "not-written", worker)
    assert r.outcome.value == "skipped" and "not written" in r.reason


@pytest.mark.parametrize(
    ("name", "missing"), [("cuda-typo", "mispelled_name"), ("typo-in-helper", "jsonn")]
)
def test_a_typo_in_a_cuda_only_variant_is_caught_without_a_gpu(
    tiny_entry, host_env, tmp_path, worker, name: str, missing: str
) -> None:
    entry = entry_with(tiny_entry, tmp_path, REPRO)
    r = skip_job(entry, host_env, name, worker)
    assert r.outcome.value == "other_error", r.reason
    assert r.exception is not None and r.exception.type == "NameError"
    assert f"name {missing!r} is not defined" in r.exception.message
    assert r.reason.startswith(
        f"the reproducer failed before its cuda cell was skipped ({NO_CUDA})"
    )


def test_an_import_error_or_an_unknown_variant_is_caught(
    tiny_entry, host_env, tmp_path, worker
) -> None:
    broken = entry_with(tiny_entry, tmp_path, "import no_such_module_here\nVARIANTS = {}\n")
    r = skip_job(broken, host_env, "baseline", worker)
    assert r.outcome.value == "other_error" and r.exception is not None
    assert r.exception.type == "ModuleNotFoundError" and "no_such_module_here" in r.reason
    entry = entry_with(tiny_entry, tmp_path, REPRO)
    r = skip_job(entry, host_env, "baseline-typo", worker)
    assert r.outcome.value == "other_error" and "unknown variant 'baseline-typo'" in r.reason


def test_a_cpu_cell_is_not_touched(tiny_entry, host_env, tmp_path) -> None:
    """Without ``skip`` a job runs as before: the variant's body runs and is measured."""
    entry = entry_with(tiny_entry, tmp_path, REPRO)
    variant = dataclasses.replace(entry.variants[0], name="cuda-typo", kind="workaround")
    job = Job(entry, variant, Cell(host_env.env, "cpu", "fp32"), 0)
    r = run_job(job, host_env, timeout_s=60, memory_limit_mb=0, provenance=PROV)
    assert r.outcome.value == "other_error" and r.exception is not None
    assert r.exception.type == "NameError" and "failed before" not in r.reason


def _load_child():
    spec = importlib.util.spec_from_file_location("harness_child_under_test", CHILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.torch
def test_the_warm_workers_probe_asks_cuda_only_in_a_fork(monkeypatch) -> None:
    """The worker's health check (probe_report with facts_in_a_fork, what ``--worker``
    runs): every torch.cuda call that could create a context happens in a short-lived
    fork; in the process that later forks the jobs, none is made and CUDA stays
    uninitialised ("Cannot re-initialize CUDA in forked subprocess" otherwise)."""
    torch = pytest.importorskip("torch")
    child = _load_child()
    calls: list[str] = []
    parent = os.getpid()

    def spy(name: str, answer: object):
        def call(*args: object, **kwargs: object) -> object:
            if os.getpid() == parent:
                calls.append(name)
            return answer

        return call

    for name, answer in (
        ("init", None),
        ("_lazy_init", None),
        ("is_available", False),
        ("device_count", 0),
        ("get_arch_list", []),
        ("get_device_name", ""),
        ("get_device_capability", (9, 0)),
        ("is_bf16_supported", False),
    ):
        monkeypatch.setattr(torch.cuda, name, spy(name, answer))
    monkeypatch.delenv(child.NVML_CHECK, raising=False)
    report = child.probe_report([["torch"]], facts_in_a_fork=True)
    assert report["versions"]["cuda_available"] == "False"  # asked, in the fork
    assert calls == []  # never in the worker itself
    assert not torch.cuda.is_initialized()
    assert child.fork_refusal() is None  # so the worker forks its jobs
    assert os.environ.get(child.NVML_CHECK) == "1"  # torch answers from NVML, no context
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "CUDA is initialised" in (child.fork_refusal() or "")


@pytest.mark.torch
@pytest.mark.parametrize(("devices", "reason"), [(1, None), (0, "no CUDA device here")])
def test_a_jobs_cuda_check_asks_cuda_only_in_a_fork(
    monkeypatch, devices: int, reason: str | None
) -> None:
    """The job's own check that its CUDA cell can run (cuda_missing_reason, before the
    variant runs in the same process): torch.cuda.is_available() would call
    cudaGetDeviceCount, which initialises the driver and poisons fork for the variant
    (multiprocessing-cuda-error's workaround 2 forks workers that use CUDA). A CUDA build is
    played by giving this torch the C entry both is_available() and device_count() reach:
    it answers in the fork, never here."""
    torch = pytest.importorskip("torch")
    child = _load_child()
    calls: list[str] = []
    parent = os.getpid()

    def spy(name: str, answer: object):
        def call(*args: object, **kwargs: object) -> object:
            if os.getpid() == parent:
                calls.append(name)
            return answer

        return call

    monkeypatch.setattr(torch.cuda, "init", spy("init", None))
    monkeypatch.setattr(torch.cuda, "_lazy_init", spy("_lazy_init", None))
    monkeypatch.setattr(
        torch._C, "_cuda_getDeviceCount", spy("_cuda_getDeviceCount", devices), raising=False
    )
    monkeypatch.delenv(child.NVML_CHECK, raising=False)
    got = child.cuda_missing_reason("cuda")
    assert got == reason if reason is None else (got or "").startswith(reason)
    assert calls == []  # the fork asked; this process made no CUDA call
    assert not torch.cuda.is_initialized()
    assert child.fork_refusal() is None
    # where CUDA is initialised already a fork would see none: asked here, as before
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    got = child.cuda_missing_reason("cuda")
    assert got == reason if reason is None else (got or "").startswith(reason)
    assert calls == ["_cuda_getDeviceCount"]


@pytest.mark.torch
def test_a_real_warm_worker_of_torch_forks_its_jobs(tiny_entry, tmp_path) -> None:
    """A warm worker that imported torch and lightning forks each job (nothing in its
    imports or its probe initialised CUDA: it would refuse), and the forked child's
    skip-check of a CUDA cell imports the reproducer there."""
    pytest.importorskip("torch")
    pytest.importorskip("lightning")
    from harness.envs.backends import BuiltEnv
    from harness.spec.matrix import Environment

    env = Environment(f"{sys.version_info[0]}.{sys.version_info[1]}", "0", "0")
    built = BuiltEnv(env, Path(sys.prefix), Path(sys.executable), probe={})
    warm = WarmWorker(built.python, CHILD, (("torch",), ("lightning",)), label="t")
    warm.start()
    try:
        entry = entry_with(tiny_entry, tmp_path, "import torch\n" + REPRO)
        r = skip_job(entry, built, "cuda-only", warm)
        assert warm.refusal is None and r.isolation == "fork"
        assert r.outcome.value == "skipped", r.reason
    finally:
        warm.stop()


def test_a_skipped_cuda_cells_reason_names_what_its_needs_decide_here(tiny_entry, host_env) -> None:
    """The variant's needs: are decided from the probe too (a torch.compile variant on a
    Python this torch does not compile on would be unsupported here)."""
    from harness.execute.steps import _skip_reason

    variant = dataclasses.replace(tiny_entry.variants[0], needs=("torch.compile",))
    job = Job(tiny_entry, variant, Cell(host_env.env, "cuda", "fp32"), 0)
    old_python = {"python": "3.13.1", "torch": "2.3.1+cpu", "setuptools": "70.0"}
    reason = _skip_reason(NO_CUDA, job, old_python)
    assert reason.startswith(NO_CUDA + "; its needs (torch.compile) here: torch 2.3.1 does not")
    assert "Python 3.13" in reason
    fine = {"python": "3.11.7", "torch": "2.5.1+cpu", "setuptools": "70.0"}
    assert _skip_reason(NO_CUDA, job, fine) == NO_CUDA


CONDITIONAL = """
try:
    import not_installed_here
except ImportError:
    not_installed_here = None

if not_installed_here is not None:

    def kernel():
        return not_installed_here.run()


def uses_kernel(device, precision):
    if not_installed_here is None:
        raise RuntimeError("a precondition, never reached on a skipped cell")
    return {"ran": {"ok": bool(kernel()), "detail": ""}}


def typo(device, precision):
    return {"ran": {"ok": bool(kernal()), "detail": ""}}


VARIANTS = {"uses-kernel": uses_kernel, "typo": typo}
"""


def test_a_name_defined_only_where_a_package_imports_is_not_a_typo(
    tiny_entry, host_env, tmp_path, worker
) -> None:
    """A Triton kernel defined under `if triton is not None:` exists on the GPU box, not here."""
    entry = entry_with(tiny_entry, tmp_path, CONDITIONAL)
    assert skip_job(entry, host_env, "uses-kernel", worker).outcome.value == "skipped"
    r = skip_job(entry, host_env, "typo", worker)
    assert r.outcome.value == "other_error" and "kernal" in r.reason
