"""Reproducer: "TracerWarning: Converting a tensor to a Python boolean"
(deadends.dev pytorch/jit-trace-warning/pt2-linux).

torch.jit.trace of a function that branches on a tensor's value (x * 2 when x.sum() > 0,
else x - 1), traced with a positive example. The documented signature is a warning: where
torch issues a TracerWarning while tracing, the run raises that very warning object (the
one torch created, recorded by warnings.catch_warnings), so the harness can classify it.
Every variant that produces a function must agree with the eager one on a positive and a
negative input, so a trace that froze one branch is `wrong_result`.
"""

from __future__ import annotations

import warnings

import torch
from reprokit import Unsupported


def branchy(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:
        return x * 2
    return x - 1


def branchless(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.sum() > 0, x * 2, x - 1)


def one_branch(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def compile_and_compare(device, fn, script=False, ignore_warnings=False, reference=branchy):
    """torch.jit.trace (or ``script``) of ``fn`` on a positive example, with TracerWarning
    filtered out where ``ignore_warnings``: a TracerWarning torch issues is raised; the
    result must agree with ``reference`` on a positive and a negative input."""
    tracer_warning = getattr(torch.jit, "TracerWarning", None)
    if tracer_warning is None:
        raise Unsupported("torch.jit.TracerWarning does not exist in torch %s" % torch.__version__)
    positive = torch.tensor([1.0, 2.0], device=device)
    negative = torch.tensor([-1.0, -2.0], device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if ignore_warnings:
            warnings.filterwarnings("ignore", category=tracer_warning)
        compiled = torch.jit.script(fn) if script else torch.jit.trace(fn, positive)
    tracer = [w for w in caught if issubclass(w.category, tracer_warning)]
    if tracer and not ignore_warnings:
        raise tracer[0].message  # the TracerWarning instance torch issued, unchanged
    got = [compiled(t).tolist() for t in (positive, negative)]
    want = [reference(t).tolist() for t in (positive, negative)]
    return {
        "agrees_on_both_branches": {
            "ok": got == want,
            "detail": "outputs for a positive and a negative input %s, eager %s; TracerWarnings seen %d"
            % (got, want, len(tracer)),
        }
    }


def baseline_branch_on_tensor(device, precision):
    return compile_and_compare(device, branchy)


def workaround1_jit_script(device, precision):
    return compile_and_compare(device, branchy, script=True)


def workaround2_branchless(device, precision):
    return compile_and_compare(device, branchless)


def deadend1_ignore_tracer_warnings(device, precision):
    return compile_and_compare(device, branchy, ignore_warnings=True)


def deadend2_remove_control_flow(device, precision):
    return compile_and_compare(device, one_branch)


def control_no_branch(device, precision):
    return compile_and_compare(device, one_branch, reference=one_branch)


VARIANTS = {
    "baseline-branch-on-tensor": baseline_branch_on_tensor,
    "workaround1-jit-script": workaround1_jit_script,
    "workaround2-branchless": workaround2_branchless,
    "deadend1-ignore-tracer-warnings": deadend1_ignore_tracer_warnings,
    "deadend2-remove-control-flow": deadend2_remove_control_flow,
    "control-no-branch": control_no_branch,
}
