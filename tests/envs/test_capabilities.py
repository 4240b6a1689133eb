"""The pre-run decision for CUDA cells, as a pure function over probe facts.

The arch lists are those of real torch wheels, read with ``torch._C._cuda_getArchFlags()``
from the environments this project builds (PyPI's default Linux wheels); the compute
capabilities are those NVIDIA publishes for real GPUs.
"""

from __future__ import annotations

import pytest

from harness.envs.capabilities import CudaFacts, has_kernel_image, precheck
from harness.outcomes import Outcome

# torch build -> torch.cuda.get_arch_list(), as measured in the project's environments
CU102 = ("sm_37", "sm_50", "sm_60", "sm_70")  # 1.10.2+cu102, 1.11.0+cu102, 1.12.1+cu102
CU117 = ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86")  # 1.13.1, 2.0.1 +cu117
CU121 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")  # 2.1.2 to 2.4.1 +cu121

# GPU -> compute capability (NVIDIA's CUDA GPUs table)
K80, P100, V100, T4, A100, A10, L4, H200, B200 = (
    (3, 7),
    (6, 0),
    (7, 0),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 9),
    (9, 0),
    (10, 0),
)


@pytest.mark.parametrize(
    ("gpu", "arch_list", "runs"),
    [
        (H200, CU102, False),  # torch 1.10-1.12 on an H200: "no kernel image is available"
        (H200, CU117, False),  # torch 1.13/2.0 (cu117) stop at sm_86; sm_90 is another major
        (H200, CU121, True),
        (A100, CU102, False),
        (A100, CU117, True),
        (A10, CU117, True),  # sm_86 exactly
        (L4, CU117, True),  # 8.9 runs sm_86 cubins (same major, higher minor)
        (L4, CU121, True),
        (V100, CU102, True),
        (T4, CU102, True),  # 7.5 runs sm_70 cubins
        (P100, CU121, True),
        (K80, CU121, False),  # cu121 dropped sm_37
        (K80, CU102, True),
        (B200, CU121, False),  # 10.0 is a new major: sm_90 cubins do not run
    ],
)
def test_kernel_image_for_real_builds_and_gpus(
    gpu: tuple[int, int], arch_list: tuple[str, ...], runs: bool
) -> None:
    assert has_kernel_image(gpu, arch_list) is runs


@pytest.mark.parametrize(
    ("gpu", "arch_list", "runs"),
    [
        ((8, 6), ("sm_80",), True),  # binary compatible upwards within a major
        ((8, 0), ("sm_86",), False),  # ... never downwards
        ((9, 0), ("sm_80", "compute_80"), True),  # PTX is compiled by the driver for 9.0
        ((7, 5), ("compute_80",), False),  # ... but not for an older GPU
        ((9, 0), ("sm_90a",), True),  # arch-specific: that capability only
        ((9, 1), ("sm_90a",), False),
        ((10, 3), ("sm_100f",), True),  # family-specific: the 10.x family from 10.0
        ((12, 0), ("sm_100f",), False),
    ],
)
def test_kernel_image_rules(gpu: tuple[int, int], arch_list: tuple[str, ...], runs: bool) -> None:
    assert has_kernel_image(gpu, arch_list) is runs


@pytest.mark.parametrize("arch_list", [(), ("gfx90a", "gfx942")])
def test_kernel_image_unknown_when_it_cannot_tell(arch_list: tuple[str, ...]) -> None:
    assert has_kernel_image(H200, arch_list) is None


def facts(**probe: str) -> CudaFacts:
    return CudaFacts.from_probe({"torch": "2.4.1+cu121", **probe})


GPU_H200 = {
    "torch_cuda": "12.1",
    "cuda_available": "True",
    "gpu": "NVIDIA H200",
    "compute_capability": "9.0",
    "bf16_supported": "True",
}


@pytest.mark.parametrize(
    ("probe", "device", "precision", "outcome", "reason"),
    [
        ({}, "cpu", "bf16", None, ""),
        ({"torch_cuda": "None"}, "cuda", "fp32", Outcome.SKIPPED, "CPU-only build"),
        (
            {"torch_cuda": "12.1", "cuda_available": "False"},
            "cuda",
            "fp32",
            Outcome.SKIPPED,
            "no CUDA device here (torch.cuda.is_available() is False; torch built with CUDA 12.1)",
        ),
        ({**GPU_H200, "cuda_arch_list": " ".join(CU121)}, "cuda", "bf16", None, ""),
        (
            {**GPU_H200, "cuda_arch_list": " ".join(CU117), "torch_cuda": "11.7"},
            "cuda",
            "fp32",
            Outcome.UNSUPPORTED,
            "NVIDIA H200 has compute capability 9.0 (sm_90); torch 2.4.1+cu121 (CUDA 11.7) has "
            "kernels for sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 only: every CUDA kernel would "
            "fail with 'no kernel image is available for execution on the device'",
        ),
        (
            {
                **GPU_H200,
                "gpu": "Tesla V100-SXM2-16GB",
                "compute_capability": "7.0",
                "bf16_supported": "False",
                "cuda_arch_list": " ".join(CU121),
            },
            "cuda",
            "bf16",
            Outcome.UNSUPPORTED,
            "Tesla V100-SXM2-16GB (compute capability 7.0) does not support bfloat16",
        ),
        (
            {**GPU_H200, "compute_capability": "7.0", "bf16_supported": "False"},
            "cuda",
            "fp16",
            None,
            "",
        ),
        # a ROCm build answers torch.cuda; its gfx architectures are not judged here
        (
            {**GPU_H200, "torch_cuda": "None", "torch_hip": "6.2", "cuda_arch_list": "gfx942"},
            "cuda",
            "fp32",
            None,
            "",
        ),
    ],
)
def test_precheck_decides_cuda_cells_before_a_run(
    probe: dict[str, str],
    device: str,
    precision: str,
    outcome: Outcome | None,
    reason: str,
) -> None:
    decided = precheck(device, precision, facts(**probe))
    if outcome is None:
        assert decided is None
    else:
        assert decided is not None
        assert decided[0] is outcome
        assert reason in decided[1]


def test_precheck_without_torch_is_a_skip_that_says_so() -> None:
    decided = precheck("cuda", "fp32", CudaFacts.from_probe({"six": "1.16.0"}))
    assert decided == (
        Outcome.SKIPPED,
        "no CUDA here: torch was not imported (a stand-in environment)",
    )
