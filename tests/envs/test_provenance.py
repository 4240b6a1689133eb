"""CUDA provenance per record: from the environment's probe, over the machine's."""

from __future__ import annotations

from harness.envs.provenance import cuda_provenance

MACHINE = {"host": "box", "gpu": "none", "driver": "none"}


def test_gpu_in_use_records_cuda_build_capability_and_name() -> None:
    probe = {
        "torch_cuda": "12.1",
        "cuda_available": "True",
        "gpu": "NVIDIA H200",
        "compute_capability": "9.0",
        "cuda_driver_api": "12.4",
    }
    machine = {"host": "box", "gpu": "NVIDIA H200", "driver": "550.54.15"}
    out = cuda_provenance(machine, probe)
    assert out == {
        **machine,
        "cuda": "12.1",
        "compute_capability": "9.0",
        "cuda_driver_api": "12.4",
    }
    # no nvidia-smi on the machine: the GPU's name comes from torch
    assert cuda_provenance(MACHINE, probe)["gpu"] == "NVIDIA H200"


def test_no_usable_gpu_records_none_not_the_wheels_cuda_build() -> None:
    out = cuda_provenance(MACHINE, {"torch_cuda": "12.1", "cuda_available": "False"})
    assert out["cuda"] == "none" and out["compute_capability"] == "none"
    assert out["gpu"] == "none"
    assert cuda_provenance(MACHINE, {})["cuda"] == "none"  # a stand-in: no torch at all
