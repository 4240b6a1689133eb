"""Every committed variant that may run on CUDA, put through the check a CUDA cell gets on a
machine without one (the child imports repro.py, finds the variant and reads it for
undefined names, then records ``skipped``): the GPU window is not spent on a typo. Real
reproducers on the real torch of the test interpreter, through one warm worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.envs.backends import CHILD
from harness.execute.plan import Job
from harness.execute.runner import run_job
from harness.execute.warm import WarmWorker
from harness.spec.entries import load_entries
from harness.spec.matrix import Cell
from tests.paths import REPO

NO_CUDA = "no CUDA here: the test machine"

CUDA_VARIANTS = [
    (entry, variant)
    for entry in load_entries(REPO / "repros")
    for variant in entry.variants
    if "cuda" in variant.devices and variant.written
]


@pytest.fixture(scope="module")
def torch_worker(request: pytest.FixtureRequest) -> Iterator[WarmWorker]:
    import sys

    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    warm = WarmWorker(sys.executable, CHILD, (("torch",),), label="cuda-check")
    warm.start()
    yield warm
    warm.stop()


@pytest.mark.slow
@pytest.mark.torch
def test_every_cuda_variant_imports_and_resolves_without_a_gpu(host_env, torch_worker) -> None:
    assert len(CUDA_VARIANTS) > 100  # the domains' cuda variants and the PyTorch domain's
    failed = []
    for entry, variant in CUDA_VARIANTS:
        job = Job(entry, variant, Cell(host_env.env, "cuda", variant.precisions[0]), 0)
        record = run_job(
            job,
            host_env,
            timeout_s=120,
            memory_limit_mb=0,
            provenance={"host": "test"},
            worker=torch_worker,
            skip=NO_CUDA,
        )
        if record.outcome.value != "skipped":
            failed.append(f"{job.id}: {record.outcome.value} {record.reason} {record.exception}")
    assert not failed, "\n".join(failed)
