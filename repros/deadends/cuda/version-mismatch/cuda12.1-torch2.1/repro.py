"""Reproducer: "The current CUDA version is not compatible with the installed PyTorch build"
(deadends/cuda/version-mismatch/cuda12.1-torch2.1).

No torch release prints the documented sentence (`python -m harness msgsearch` looks for it in
every environment): a pip-installed torch brings its own CUDA runtime and never compares it
with the system's toolkit. What the record's advice can be measured by is the build's own
CUDA version, torch.version.cuda, against the toolkit the record names (12.1). Every cell
of the matrix is torch as PyPI serves it without an index URL, which is the situation of both
dead ends; the record is about the torch 2.1 line, so other releases are `unsupported`.
The cu121 build of workaround 1 is installed by the harness (entry.yaml `requires`).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported

TOOLKIT = "12.1"  # the system CUDA toolkit the record names
LINE = "2.1"  # the torch release line the record is about


def pypi_cuda_build(precision):
    """Unsupported unless this is a CUDA build of the record's torch line."""
    if precision != "fp32":
        raise Unsupported("a build's CUDA version does not depend on precision: fp32 only")
    release = torch.__version__.split("+")[0]
    if not (release == LINE or release.startswith(LINE + ".")):
        raise Unsupported("the record is about torch %s; this cell has torch %s" % (LINE, release))
    if torch.version.cuda is None:
        raise Unsupported("torch %s is a CPU-only build: no CUDA version to compare" % release)


def build_matches(cuda=None, toolkit=TOOLKIT):
    cuda = torch.version.cuda if cuda is None else cuda
    return {
        "ok": cuda == toolkit,
        "detail": "torch %s is built with CUDA %s; the toolkit is CUDA %s"
        % (torch.__version__, cuda, toolkit),
    }


def computes(expected=40.0):
    """A product on the CPU with this build, against its known value."""
    a = torch.arange(1.0, 5.0)
    got = float(a @ (a + 1))
    return {"ok": got == expected, "detail": "[1..4] . [2..5] = %s (expected %s)" % (got, expected)}


def baseline_pypi_default_build(device, precision):
    pypi_cuda_build(precision)
    return {"build_cuda_matches_toolkit": build_matches(), "computes": computes()}


def workaround1_cu121_index_build(device, precision):
    # the cu121 build is installed by the harness (entry.yaml requires)
    pypi_cuda_build(precision)
    return {"build_cuda_matches_toolkit": build_matches()}


def deadend1_force_reinstall(device, precision):
    # --force-reinstall from PyPI installs the wheel the cell already has
    pypi_cuda_build(precision)
    return {"build_cuda_matches_toolkit": build_matches()}


def deadend2_no_index_url(device, precision):
    pypi_cuda_build(precision)
    return {"build_cuda_matches_toolkit": build_matches()}


def control_cell_build(device, precision):
    if precision != "fp32":
        raise Unsupported("a build's CUDA version does not depend on precision: fp32 only")
    return {"computes": computes()}


VARIANTS = {
    "baseline-pypi-default-build": baseline_pypi_default_build,
    "workaround1-cu121-index-build": workaround1_cu121_index_build,
    "deadend1-force-reinstall": deadend1_force_reinstall,
    "deadend2-no-index-url": deadend2_no_index_url,
    "control-cell-build": control_cell_build,
}
