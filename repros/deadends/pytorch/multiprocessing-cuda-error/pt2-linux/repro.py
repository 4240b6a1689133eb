"""Reproducer: "Cannot re-initialize CUDA in forked subprocess"
(deadends/pytorch/multiprocessing-cuda-error/pt2-linux).

The parent process uses CUDA (a model moved to the GPU), then forks: a child that uses CUDA
in turn cannot initialise it again. Each child's work is a function of torch itself
(`torch.cuda.current_device`, which initialises CUDA where it is not yet), so that a `spawn`
child can unpickle it without importing this file. Each variant applies one workaround or
dead end of the knowledge-base entry
(https://deadends.dev/pytorch/multiprocessing-cuda-error/pt2-linux). Written for CUDA cells;
the harness skips them where no CUDA device exists.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.pool import ThreadPool

import torch
from reprokit import Unsupported, time_left
from torch import nn

WORKERS = 2
# the workers' CUDA work: a function of torch itself (it initialises CUDA where it is not yet
# and returns the device index), so that a spawned worker can unpickle it without importing
# this file (the harness loads it under a module name no child process can import)
WORKER_CUDA_WORK = torch.cuda.current_device


class CudaDataset(torch.utils.data.Dataset):
    """A dataset that builds each sample on the GPU (what the DataLoader baseline does)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        return torch.full((2,), float(i), device="cuda")


def in_workers(pool, work) -> list:
    """``work()`` once per worker slot; a worker's exception is raised here, as it was."""
    pending = [pool.apply_async(work) for _ in range(WORKERS)]
    return [p.get(timeout=time_left(120)) for p in pending]


def parent_check(model) -> dict:
    out = model(torch.ones(3, 4, device="cuda"))
    return {
        "ok": out.device.type == "cuda" and bool(torch.isfinite(out).all()),
        "detail": "the parent's model output on %s" % out.device,
    }


def parent_first(spawn=False, init=False, parent_cuda=True):
    """The start method's context (fork, or 'spawn' set as the entry says: before any CUDA
    operation), then the parent's own CUDA work (after torch.cuda.init() where ``init``)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Unsupported("this platform has no 'fork' start method")
    if spawn:
        torch.multiprocessing.set_start_method("spawn")
        context = multiprocessing.get_context()
    else:
        context = multiprocessing.get_context("fork")
    if init:
        torch.cuda.init()
    model = nn.Linear(4, 2).to("cuda") if parent_cuda else None
    return context, model


def cuda_in_workers(pool_for, model) -> dict:
    """WORKER_CUDA_WORK in each worker of ``pool_for()``; then the parent uses CUDA."""
    with pool_for() as pool:
        got = in_workers(pool, WORKER_CUDA_WORK)
    if model is None:  # the parent may use CUDA once the workers have done so
        model = nn.Linear(4, 2).to("cuda")
    want = torch.cuda.current_device()
    return {
        "workers_used_cuda": {
            "ok": got == [want] * WORKERS,
            "detail": "the workers' CUDA device %s, the parent's %d" % (got, want),
        },
        "parent_still_uses_cuda": parent_check(model),
    }


def process_pool(**options):
    context, model = parent_first(**options)
    return cuda_in_workers(lambda: context.Pool(WORKERS), model)


def baseline_fork_pool(device, precision):
    return process_pool()


def baseline_dataloader_workers(device, precision):
    parent_first()
    loader = torch.utils.data.DataLoader(
        CudaDataset(), batch_size=2, num_workers=WORKERS, multiprocessing_context="fork"
    )
    batches = [b for b in loader]
    return {
        "samples_built_on_the_gpu": {
            "ok": len(batches) == 2 and all(b.device.type == "cuda" for b in batches),
            "detail": "batches on %s" % [str(b.device) for b in batches],
        }
    }


def workaround1_spawn(device, precision):
    return process_pool(spawn=True)


def workaround2_cuda_only_in_children(device, precision):
    return process_pool(parent_cuda=False)


def deadend1_init_before_fork(device, precision):
    return process_pool(init=True)


def deadend2_threads(device, precision):
    _context, model = parent_first()
    return cuda_in_workers(lambda: ThreadPool(WORKERS), model)


def control_fork_cpu_work(device, precision):
    context, model = parent_first()
    with context.Pool(WORKERS) as pool:
        got = pool.map(sum, [[1, 2], [3, 4]])
    return {
        "workers_ran": {"ok": got == [3, 7], "detail": "sums %s, expected [3, 7]" % got},
        "parent_still_uses_cuda": parent_check(model),
    }


VARIANTS = {
    "baseline-fork-pool": baseline_fork_pool,
    "baseline-dataloader-workers": baseline_dataloader_workers,
    "workaround1-spawn": workaround1_spawn,
    "workaround2-cuda-only-in-children": workaround2_cuda_only_in_children,
    "deadend1-init-before-fork": deadend1_init_before_fork,
    "deadend2-threads": deadend2_threads,
    "control-fork-cpu-work": control_fork_cpu_work,
}
