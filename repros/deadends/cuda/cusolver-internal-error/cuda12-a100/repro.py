"""Reproducer: "RuntimeError: cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR"
(deadends/cuda/cusolver-internal-error/cuda12-a100).

The record blames the input: a singular matrix, or one holding NaN/Inf, given to a linear
solve. Each baseline gives torch.linalg.solve one such 3x3 system: on CUDA it runs cuSOLVER,
on the CPU LAPACK, whose refusal of the singular matrix (torch.linalg.LinAlgError, a
RuntimeError naming the singular input) is the CPU twin, declared as the baselines' own
signature. Where nothing is raised, the postconditions say whether the answer solves the
system. Each variant applies one workaround or dead end of
https://deadends.dev/cuda/cusolver-internal-error/cuda12-a100.
"""

from __future__ import annotations

import contextlib

import torch
from reprokit import Unsupported

EPS = 1e-6  # the record's regularisation


def system(device, case):
    """(A, b): a 3x3 system, ``case`` "singular" (a repeated row), "nan" (a NaN entry) or
    "good" (well conditioned), in float64 on ``device``."""
    a = torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 1.0], [2.0, 1.0, 4.0]], dtype=torch.float64)
    if case == "singular":
        # exactly singular; LAPACK raises where its elimination meets an exact zero pivot.
        # On an Intel Xeon, torch 1.13.1-2.10.0 returned a solution instead (residual 0)
        # where an AMD EPYC raised: docs/evidence/provenance-remeasure.md
        a[2] = a[0]
    elif case == "nan":
        a[1, 1] = float("nan")
    b = torch.tensor([[1.0], [2.0], [1.0]], dtype=torch.float64)  # in the singular A's range
    return a.to(device), b.to(device)


def solved(a, b, x) -> dict:
    """Postconditions: the answer is finite and solves A x = b (relative residual)."""
    finite = bool(torch.isfinite(x).all().item())
    residual = ((a @ x - b).norm() / b.norm()).item() if finite else float("nan")
    return {
        "solution_finite": {"ok": finite, "detail": "x = %s" % x.flatten().tolist()},
        "solves_system": {
            "ok": finite and residual < 1e-6,
            "detail": "||A x - b|| / ||b|| = %r" % residual,
        },
    }


def fp64_only(precision):
    if precision != "fp32":
        # the solve runs in float64 (a singular pivot must be exactly zero): one cell
        raise Unsupported("the solve's input is float64 whatever the cell: fp32 cell only")


def solve(device, precision, case) -> dict:
    fp64_only(precision)
    a, b = system(device, case)
    return solved(a, b, torch.linalg.solve(a, b))


def need_cuda(device):
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: cuSOLVER runs only there")


def found(bad, detail) -> dict:
    return {"bad_input_found": {"ok": bad, "detail": detail}}


def nan_inf_check(a) -> dict:
    # the record's check: torch.isnan / torch.isinf on the matrix, before the solve
    bad = bool(torch.isnan(a).any().item() or torch.isinf(a).any().item())
    return found(bad, "isnan.any() or isinf.any(): %s" % bad)


def baseline_singular_cpu(device, precision):
    return solve(device, precision, "singular")


def baseline_singular_cuda(device, precision):
    need_cuda(device)
    return solve(device, precision, "singular")


def baseline_nan_cpu(device, precision):
    return solve(device, precision, "nan")


def baseline_nan_cuda(device, precision):
    need_cuda(device)
    return solve(device, precision, "nan")


def workaround1_check_nan_inf_literal(device, precision):
    # literal: the record's how, isnan/isinf only, on the singular matrix it is also for
    fp64_only(precision)
    a, b = system(device, "singular")
    return nan_inf_check(a)


def workaround1_check_nan_inf_on_nan(device, precision):
    fp64_only(precision)
    a, b = system(device, "nan")
    return nan_inf_check(a)


def workaround1_check_singular_sensible(device, precision):
    # sensible: "check if the matrix is singular" too: its rank below its size
    fp64_only(precision)
    a, b = system(device, "singular")
    rank = int(torch.linalg.matrix_rank(a).item())
    checks = nan_inf_check(a)
    checks["bad_input_found"] = found(
        checks["bad_input_found"]["ok"] or rank < a.shape[0],
        "%s; rank %d of %d" % (checks["bad_input_found"]["detail"], rank, a.shape[0]),
    )["bad_input_found"]
    return checks


def workaround2_regularize(device, precision):
    fp64_only(precision)
    a, b = system(device, "singular")
    reg = a + EPS * torch.eye(a.size(0), dtype=a.dtype, device=a.device)
    # the regularised system is what is solved; whether it answers A x = b is shown beside
    checks = solved(reg, b, torch.linalg.solve(reg, b))
    x = torch.linalg.solve(reg, b)
    residual = ((a @ x - b).norm() / b.norm()).item()
    # a shift of EPS leaves a residual of the order EPS * |x| in the original system
    checks["solves_original_system"] = {
        "ok": residual < 100 * EPS,
        "detail": "||A x - b|| / ||b|| = %r (tolerance %r)" % (residual, 100 * EPS),
    }
    return checks


def deadend1_retry(device, precision):
    fp64_only(precision)
    a, b = system(device, "singular")
    with contextlib.suppress(RuntimeError):  # the first failure, retried as the dead end says
        torch.linalg.solve(a, b)
    return solved(a, b, torch.linalg.solve(a, b))


def deadend2_cpu_fallback(device, precision):
    need_cuda(device)
    fp64_only(precision)
    a, b = system(device, "singular")
    try:
        return solved(a, b, torch.linalg.solve(a, b))
    except RuntimeError:
        a, b = a.cpu(), b.cpu()  # the fallback: the same solve on the CPU
        return solved(a, b, torch.linalg.solve(a, b))


def control_well_conditioned(device, precision):
    return solve(device, precision, "good")


VARIANTS = {
    "baseline-singular-cpu": baseline_singular_cpu,
    "baseline-singular-cuda": baseline_singular_cuda,
    "baseline-nan-cpu": baseline_nan_cpu,
    "baseline-nan-cuda": baseline_nan_cuda,
    "workaround1-check-nan-inf-literal": workaround1_check_nan_inf_literal,
    "workaround1-check-nan-inf-on-nan": workaround1_check_nan_inf_on_nan,
    "workaround1-check-singular-sensible": workaround1_check_singular_sensible,
    "workaround2-regularize": workaround2_regularize,
    "deadend1-retry": deadend1_retry,
    "deadend2-cpu-fallback": deadend2_cpu_fallback,
    "control-well-conditioned": control_well_conditioned,
}
