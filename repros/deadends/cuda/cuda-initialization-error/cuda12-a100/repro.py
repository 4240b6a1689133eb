"""Reproducer: "CUDA error: initialization error"
(deadends/cuda/cuda-initialization-error/cuda12-a100).

A process that has initialised CUDA (a tensor on the GPU) forks a child that uses CUDA: the
forked child inherits the parent's memory but not a usable CUDA context. Two children: one
that reads the parent's GPU tensor it inherited (no torch factory call, so torch's own fork
guard is never asked and the CUDA runtime answers), and one that makes a new GPU tensor (torch's
guard answers first, in its own words). The child's exception is sent back and raised in the
parent as it was (its type, its message). Each variant follows one workaround of
https://deadends.dev/cuda/cuda-initialization-error/cuda12-a100. CUDA only: without a GPU
every variant is unsupported.

One postcondition: the values the child read equal the tensor's (child_read_the_tensor).
"""

from __future__ import annotations

import builtins
import multiprocessing

import torch
from reprokit import Unsupported, time_left

VALUES = [1.0, 2.0, 3.0, 4.0]
TIMEOUT_S = 60  # a child that hangs costs the GPU window this much
# the spawned child's work: a function of torch itself, so that the child can unpickle it
# without importing this file (the harness loads it under a module name no child can import)
SPAWN_WORK = torch.Tensor.tolist


def setup(device, precision):
    if precision != "fp32":
        raise Unsupported("a forked child's CUDA does not depend on precision: fp32 only")
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("the error is a forked child's CUDA; this cell has no CUDA device")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Unsupported("this platform has no 'fork' start method")
    return torch.tensor(VALUES, device="cuda")  # CUDA initialised in the parent


def _child(work, queue):
    try:
        queue.put(("ok", work()))
    except BaseException as e:  # sent back whole: the parent raises it
        queue.put(("error", type(e).__name__, str(e)))


def raise_as_child_did(kind, message):
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        raise cls(message)
    raise RuntimeError("%s: %s" % (kind, message))


def in_forked_child(work):
    """``work()`` in a forked child (it needs no pickling: the child inherits it)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(work, queue))
    child.start()
    try:
        answer = queue.get(timeout=time_left(TIMEOUT_S))
    finally:
        child.join(10)
        if child.is_alive():
            child.terminate()
    if answer[0] == "error":
        raise_as_child_did(answer[1], answer[2])
    return answer[1]


def read_back(got, what):
    return {
        "child_read_the_tensor": {
            "ok": got == VALUES,
            "detail": "%s read %s; the tensor holds %s" % (what, got, VALUES),
        }
    }


def baseline_fork_inherited_tensor(device, precision):
    t = setup(device, precision)
    return read_back(in_forked_child(t.tolist), "the forked child")  # a device-to-host copy


def baseline_fork_new_cuda_tensor(device, precision):
    setup(device, precision)
    got = in_forked_child(lambda: torch.tensor(VALUES, device="cuda").tolist())
    return read_back(got, "the forked child")


def workaround2_spawn(device, precision):
    t = setup(device, precision)
    # the record's call; force: the harness's child may have chosen a start method already
    multiprocessing.set_start_method("spawn", force=True)
    with multiprocessing.get_context().Pool(1) as pool:
        got = pool.apply(SPAWN_WORK, (t,))  # the tensor pickled; the child makes its own context
    return read_back(got, "the spawned child")


def control_fork_cpu_copy(device, precision):
    t = setup(device, precision).cpu()  # the parent copies the tensor off the GPU first
    return read_back(in_forked_child(t.tolist), "the forked child")


VARIANTS = {
    "baseline-fork-inherited-tensor": baseline_fork_inherited_tensor,
    "baseline-fork-new-cuda-tensor": baseline_fork_new_cuda_tensor,
    "workaround2-spawn": workaround2_spawn,
    "control-fork-cpu-copy": control_fork_cpu_copy,
}
