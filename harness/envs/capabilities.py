"""Whether a cell can run in an environment, decided before a run is spent on it.

The facts come from the environment's probe (harness/envs/backends.py), which imports torch in a
process of its own: the harness never initialises CUDA itself. Everything here is pure:
facts in, a decision out, so each rule is tested with the arch lists and compute
capabilities of real torch builds and GPUs.

A CUDA cell is `skipped` when this machine or this torch has no CUDA at all (the axis is
not available here), and `unsupported` when CUDA is there but cannot do what the cell
asks: the GPU's compute capability has no kernel image in this torch build (every kernel
launch would fail with "no kernel image is available for execution on the device"), or
the GPU does not support bfloat16.

A variant that needs more than its cell names (entry.yaml ``needs``: ``torch.compile``, or
``dynamo`` for its graph capture with another backend) is `unsupported` where this torch
cannot compile on this Python (torch refuses in ``check_if_dynamo_supported``), and
`env_failed` where the environment lacks what the compiler imports (setuptools): errors of
the environment, never counted as the reproducer's. On a cuda cell, a variant that needs
``two-gpus`` is `unsupported` where torch sees one device, ``triton`` where Triton is not
installed, ``cuda-runtime`` where torch loaded no libcudart that ctypes can call (linked
statically); on a machine without CUDA the cell is skipped first.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from harness.domain import COMPILE_NEEDS, NEEDS, parse_version
from harness.outcomes import Outcome

__all__ = [
    "NEEDS",
    "CudaFacts",
    "Decision",
    "RuntimeFacts",
    "before_run",
    "compile_python_limit",
    "has_kernel_image",
    "needs_check",
    "precheck",
]

Decision = tuple[Outcome, str]  # the outcome a cell gets without running, and why

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


@dataclass(frozen=True)
class CudaFacts:
    """What the probe saw of torch's CUDA; None where it could not tell."""

    torch: str | None  # torch.__version__; None when torch was not imported (a stand-in)
    cuda_build: str | None  # torch.version.cuda; None for a CPU-only build
    hip_build: str | None  # torch.version.hip (ROCm builds answer torch.cuda too)
    available: bool  # torch.cuda.is_available()
    gpu: str = ""  # torch.cuda.get_device_name(0)
    capability: tuple[int, int] | None = None  # torch.cuda.get_device_capability(0)
    arch_list: tuple[str, ...] = ()  # torch.cuda.get_arch_list(), e.g. ("sm_80", "sm_90")
    bf16: bool | None = None  # torch.cuda.is_bf16_supported()

    @classmethod
    def from_probe(cls, probe: Mapping[str, str]) -> CudaFacts:
        def text(key: str) -> str | None:
            value = probe.get(key)
            return None if value in (None, "", "None", "none") else value

        capability = None
        cap = text("compute_capability")
        if cap and re.fullmatch(r"\d+\.\d+", cap):
            major, minor = cap.split(".")
            capability = (int(major), int(minor))
        bf16 = text("bf16_supported")
        return cls(
            torch=text("torch"),
            cuda_build=text("torch_cuda"),
            hip_build=text("torch_hip"),
            available=probe.get("cuda_available") == "True",
            gpu=probe.get("gpu", ""),
            capability=capability,
            arch_list=tuple((text("cuda_arch_list") or "").split()),
            bf16=None if bf16 is None else bf16 == "True",
        )


def has_kernel_image(capability: tuple[int, int], arch_list: tuple[str, ...]) -> bool | None:
    """Whether a build with these architectures runs kernels on a GPU of this capability.

    A cubin for sm_XY runs on capability X.y with y >= Y (binary compatible within a major
    version); sm_XYa only on X.Y itself; sm_XYf on the X family from X.Y on; PTX
    (compute_XY) is compiled by the driver for any capability >= X.Y. None: cannot tell
    (no list, or architectures this rule does not know, such as ROCm's gfx names).
    """
    if not arch_list:
        return None
    major, minor = capability
    known = False
    for arch in arch_list:
        m = _ARCH.match(arch)
        if m is None:
            continue
        known = True
        kind, arch_major, arch_minor, suffix = (
            m.group(1),
            int(m.group(2)),
            int(m.group(3)),
            m.group(4),
        )
        if kind == "compute":
            if (major, minor) >= (arch_major, arch_minor):
                return True
        elif suffix == "a":
            if (major, minor) == (arch_major, arch_minor):
                return True
        elif major == arch_major and minor >= arch_minor:
            return True
    return False if known else None


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def precheck(device: str, precision: str, facts: CudaFacts) -> Decision | None:
    """The outcome a cell gets without running, or None when it should run."""
    if device != "cuda":
        return None
    if facts.torch is None:
        return Outcome.SKIPPED, "no CUDA here: torch was not imported (a stand-in environment)"
    if facts.cuda_build is None and facts.hip_build is None:
        return Outcome.SKIPPED, (
            f"no CUDA here: torch {facts.torch} is a CPU-only build (torch.version.cuda is None)"
        )
    if not facts.available:
        return Outcome.SKIPPED, (
            "no CUDA device here (torch.cuda.is_available() is False; "
            f"torch built with CUDA {facts.cuda_build or facts.hip_build})"
        )
    gpu = facts.gpu or "the GPU"
    if facts.capability is not None and facts.hip_build is None:
        runs = has_kernel_image(facts.capability, facts.arch_list)
        if runs is False:
            cap = facts.capability
            return Outcome.UNSUPPORTED, (
                f"{gpu} has compute capability {cap[0]}.{cap[1]} ({_sm(cap)}); torch "
                f"{facts.torch} (CUDA {facts.cuda_build}) has kernels for "
                f"{' '.join(facts.arch_list)} only: every CUDA kernel would fail with "
                "'no kernel image is available for execution on the device'"
            )
    if precision == "bf16" and facts.bf16 is False:
        where = f"{gpu}" + (
            f" (compute capability {facts.capability[0]}.{facts.capability[1]})"
            if facts.capability
            else ""
        )
        return Outcome.UNSUPPORTED, (
            f"{where} does not support bfloat16 in torch {facts.torch} "
            "(torch.cuda.is_bf16_supported() is False)"
        )
    return None


# -- what a variant needs beyond its cell (entry.yaml ``needs``) ---------------------------

# the first Python each torch release refuses to compile on, read from its
# torch/_dynamo/eval_frame.py (check_if_dynamo_supported: "Python 3.X+ not yet supported
# for torch.compile"); releases after the last row are taken to refuse what it refuses
_COMPILE_PYTHON: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (
    ((2, 0), (3, 11)),
    ((2, 1), (3, 12)),
    ((2, 4), (3, 13)),
    ((2, 6), (3, 14)),
    ((2, 10), (3, 15)),
)


@dataclass(frozen=True)
class RuntimeFacts:
    """What the probe saw of the interpreter and torch; None where it could not tell."""

    python: tuple[int, int] | None
    torch: Version | None  # the release (2.0.1), local part (+cu117) dropped
    setuptools: bool | None  # installed; None: the probe did not look (an older probe)
    device_count: int | None = None  # torch.cuda.device_count() where CUDA is available
    triton: bool | None = None  # installed (found, not imported)
    cuda_runtime: str | None = None  # the libcudart torch mapped; "" none; None: not looked

    @classmethod
    def from_probe(cls, probe: Mapping[str, str]) -> RuntimeFacts:
        python = None
        m = re.match(r"^(\d{1,4})\.(\d{1,4})(?!\d)", probe.get("python", ""))
        if m:
            python = (int(m.group(1)), int(m.group(2)))
        torch = None
        try:
            torch = parse_version(probe["torch"].split("+")[0]) if probe.get("torch") else None
        except InvalidVersion:
            torch = None
        found = probe.get("setuptools")
        count = probe.get("device_count", "")
        triton = probe.get("triton")
        return cls(
            python,
            torch,
            None if found is None else found != "",
            int(count) if count.isdigit() else None,
            None if triton is None else triton != "",
            probe.get("cuda_runtime"),
        )


def compile_python_limit(torch: Version) -> tuple[int, int] | None:
    """The first Python this torch release refuses to compile on; None: no torch.compile."""
    limit = None
    for release, python in _COMPILE_PYTHON:
        if (torch.major, torch.minor) >= release:
            limit = python
    return limit


def needs_check(
    needs: Collection[str], facts: RuntimeFacts, device: str | None = None
) -> Decision | None:
    """The outcome a variant that needs ``needs`` gets here without running, or None; the
    device's needs are decided on a cuda ``device`` only."""
    if not needs or facts.torch is None:
        return None
    if device == "cuda":
        found = _device_needs(needs, facts)
        if found is not None:
            return found
    if not set(needs) & set(COMPILE_NEEDS):
        return None
    torch = facts.torch
    limit = compile_python_limit(torch)
    if limit is None:
        return (
            Outcome.UNSUPPORTED,
            f"torch.compile does not exist in torch {torch} (it came in 2.0)",
        )
    if facts.python is not None and facts.python >= limit:
        return Outcome.UNSUPPORTED, (
            f"torch {torch} does not compile on Python {facts.python[0]}.{facts.python[1]}: "
            f'"Python {limit[0]}.{limit[1]}+ not yet supported for torch.compile" '
            "(torch._dynamo's check_if_dynamo_supported)"
        )
    if "torch.compile" in needs and facts.setuptools is False:
        return Outcome.ENV_FAILED, (
            "setuptools is not installed here, and torch.compile's default backend (inductor) "
            "imports it (torch.utils.cpp_extension) to build its kernels: "
            "\"No module named 'setuptools'\"; pin setuptools in this environment"
        )
    return None


def _device_needs(needs: Collection[str], facts: RuntimeFacts) -> Decision | None:
    """What a cuda cell lacks of the variant's device needs (each decided only where the
    probe looked)."""
    if "two-gpus" in needs and facts.device_count is not None and facts.device_count < 2:
        return Outcome.UNSUPPORTED, (
            f"the variant needs two CUDA devices (needs: two-gpus); torch sees "
            f"{facts.device_count} here (torch.cuda.device_count())"
        )
    if "triton" in needs and facts.triton is False:
        return Outcome.UNSUPPORTED, (
            "the variant's kernel is a Triton kernel (needs: triton), and Triton is not "
            "installed here"
        )
    if "cuda-runtime" in needs and facts.cuda_runtime == "":
        return Outcome.UNSUPPORTED, (
            "the variant calls the CUDA runtime torch loaded (needs: cuda-runtime), and torch "
            "mapped no libcudart here (linked statically?)"
        )
    return None


def before_run(
    device: str, precision: str, needs: Collection[str], probe: Mapping[str, str]
) -> Decision | None:
    """The outcome a job gets without running, from its environment's probe: its cell's
    (``precheck``), then its variant's needs (``needs_check``); None: it runs."""
    return precheck(device, precision, CudaFacts.from_probe(probe)) or needs_check(
        needs, RuntimeFacts.from_probe(probe), device
    )
