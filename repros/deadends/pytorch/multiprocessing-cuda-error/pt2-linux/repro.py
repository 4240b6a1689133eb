"""Reproducer: "Cannot re-initialize CUDA in forked subprocess"
(deadends/pytorch/multiprocessing-cuda-error/pt2-linux).

The parent process uses CUDA (a model moved to the GPU), then forks: a child that uses CUDA
in turn cannot initialise it again. Each child's work is a function of torch itself
(`torch.cuda.current_device`, which initialises CUDA where it is not yet), so that a `spawn`
child can unpickle it without importing this file. Each variant applies one workaround or
dead end of the knowledge-base entry
(https://deadends.dev/pytorch/multiprocessing-cuda-error/pt2-linux). Written for CUDA cells;
the harness skips them where no CUDA device exists.

    python repro.py --list
    python repro.py --variant baseline-fork-pool --device cuda --precision fp32
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.pool import ThreadPool
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-fork-pool": "model on the GPU in the parent, then a fork Pool whose worker uses CUDA",
    "baseline-dataloader-workers": "model on the GPU in the parent, then a DataLoader (num_workers=2, fork) whose dataset makes CUDA tensors",
    "workaround1-spawn": "torch.multiprocessing.set_start_method('spawn') first, then the baseline's Pool",
    "workaround2-cuda-only-in-children": "the parent touches no CUDA before the fork Pool; the worker uses CUDA",
    "deadend1-init-before-fork": "torch.cuda.init() in the parent before the fork Pool whose worker uses CUDA",
    "deadend2-threads": "a ThreadPool instead of processes, each thread using CUDA",
    "control-fork-cpu-work": "model on the GPU in the parent, a fork Pool whose worker does CPU work only",
}
NOT_WRITTEN = []

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


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cuda":
        raise Unsupported("CUDA in a forked child needs a CUDA device; this cell is %s" % device)
    if precision != "fp32":
        raise Unsupported("process start methods do not depend on precision: run fp32 only")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Unsupported("this platform has no 'fork' start method")
    if variant == "workaround1-spawn":
        # as the entry says: before any CUDA operation
        torch.multiprocessing.set_start_method("spawn")
        pool_context = multiprocessing.get_context()
    else:
        pool_context = multiprocessing.get_context("fork")

    model = None
    if variant == "deadend1-init-before-fork":
        torch.cuda.init()
    if variant != "workaround2-cuda-only-in-children":
        model = nn.Linear(4, 2).to("cuda")  # the parent's own CUDA work

    if variant == "baseline-dataloader-workers":
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
    if variant == "deadend2-threads":
        with ThreadPool(WORKERS) as pool:
            got = in_workers(pool, WORKER_CUDA_WORK)
    elif variant == "control-fork-cpu-work":
        with pool_context.Pool(WORKERS) as pool:
            got = pool.map(sum, [[1, 2], [3, 4]])
        return {
            "workers_ran": {"ok": got == [3, 7], "detail": "sums %s, expected [3, 7]" % got},
            "parent_still_uses_cuda": parent_check(model),
        }
    else:
        with pool_context.Pool(WORKERS) as pool:
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


def in_workers(pool, work) -> list:
    """``work()`` once per worker slot; a worker's exception is raised here, as it was."""
    pending = [pool.apply_async(work) for _ in range(WORKERS)]
    return [p.get(timeout=120) for p in pending]


def parent_check(model) -> dict:
    out = model(torch.ones(3, 4, device="cuda"))
    return {
        "ok": out.device.type == "cuda" and bool(torch.isfinite(out).all()),
        "detail": "the parent's model output on %s" % out.device,
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
