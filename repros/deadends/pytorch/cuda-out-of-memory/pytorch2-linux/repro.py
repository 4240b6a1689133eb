"""Reproducer: "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
(deadends/pytorch/cuda-out-of-memory/pytorch2-linux).

Three ways a training or evaluation loop runs out of GPU memory, each sized from the free
memory of the device it runs on (so the same script exhausts any GPU): a batch whose layer
output no longer fits, a deep stack whose saved activations do not fit, and an evaluation
loop that keeps every output with its graph. Each variant applies one workaround or dead end
of the knowledge-base entry (https://deadends.dev/pytorch/cuda-out-of-memory/pytorch2-linux).
CUDA cells only (skipped elsewhere), sized for float32 (the AMP workaround sets its own).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, host_memory_mb
from torch import nn

WIDTH = 256
ROW = WIDTH * 4  # bytes of one float32 row
# what a CUDA process holds of the host's memory before it keeps anything there (torch, the
# CUDA context, cuBLAS): an upper figure
CUDA_HOST_MIB = 3072


def rows(fraction: float, card=None) -> int:
    free, _total = torch.cuda.mem_get_info()
    if card is not None:
        free = min(free, card)
    return max(1, int(fraction * free / ROW))


def finite_grads(model) -> tuple:
    grads = [p.grad for p in model.parameters()]
    good = sum(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    return good == len(grads), "%d of %d parameters have finite gradients" % (good, len(grads))


def measured(work, before=None) -> dict:
    """``work()`` -> (rows processed, ok, detail), with the peak memory it took; ``before()``
    runs first (after the capability check)."""
    if not hasattr(torch.cuda, "mem_get_info"):
        raise Unsupported(
            "torch.cuda.mem_get_info (to size the batch from free memory) is missing in torch %s"
            % torch.__version__
        )
    if before is not None:
        before()
    torch.manual_seed(0)
    n, ok, detail = work()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    total = torch.cuda.get_device_properties(0).total_memory
    return {
        "results_finite": {
            "ok": ok,
            "detail": "%s; %d rows processed; peak allocated %.1f GiB of %.1f GiB"
            % (detail, n, peak / 2**30, total / 2**30),
        }
    }


def batch_too_large(micro_batches: int = 0) -> tuple:
    model = nn.Linear(WIDTH, WIDTH).cuda()
    n = rows(0.6)
    if micro_batches:
        for _ in range(micro_batches):
            x = torch.randn(n // micro_batches, WIDTH, device="cuda")
            model(x).pow(2).mean().div(micro_batches).backward()
            del x
    else:
        x = torch.randn(n, WIDTH, device="cuda")
        model(x).pow(2).mean().backward()
    return (n, *finite_grads(model))


def deep_activations(forward=lambda model, x: model(x)) -> tuple:
    layers = []
    for _ in range(16):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers).cuda()
    n = rows(0.08)
    x = torch.randn(n, WIDTH, device="cuda", requires_grad=True)
    forward(model, x).float().pow(2).mean().backward()
    return (n, *finite_grads(model))


def keep_outputs(keep=lambda out: out, after_batch=lambda: None, card=None) -> tuple:
    model = nn.Linear(WIDTH, WIDTH).cuda()
    n = rows(0.15, card)
    kept = []
    for _ in range(10):
        x = torch.randn(n, WIDTH, device="cuda")
        out = model(x)
        kept.append(keep(out))
        del x, out
        after_batch()
    good = sum(bool(torch.isfinite(k).all()) for k in kept)
    return n * len(kept), good == 10, "%d of 10 batches' outputs kept and finite" % good


def baseline_batch_too_large(device, precision):
    return measured(batch_too_large)


def baseline_deep_activations(device, precision):
    return measured(deep_activations)


def baseline_keep_outputs(device, precision):
    return measured(keep_outputs)


def workaround1_micro_batches(device, precision):
    return measured(lambda: batch_too_large(micro_batches=8))


def workaround2_amp(device, precision):
    def under_amp(model, x):
        with torch.autocast("cuda", dtype=torch.float16):
            return model(x)

    return measured(lambda: deep_activations(under_amp))


def host_card():
    """The card that keep-outputs exhausts, sized so that its ten outputs (1.5 cards) fit the
    host memory this job may hold (the harness's bound; by hand, no bound: the free memory),
    and the process capped to it: ten outputs of 15% of free memory on a 141 GB card are
    210 GB of host memory. None where nothing bounds the host."""
    bound = host_memory_mb()
    if bound is None:
        return None
    room = (bound - CUDA_HOST_MIB) * 2**20
    if room <= 0:
        raise Unsupported(
            "the job may hold %d MiB of host memory, less than a CUDA process takes before it "
            "keeps anything there (%d MiB)" % (bound, CUDA_HOST_MIB)
        )
    card = min(room / 2, torch.cuda.mem_get_info()[0])  # 1.5 cards kept: 75% of the room
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(card / total)
    return card


def workaround3_detach_to_cpu(device, precision):
    def kept_on_the_host():
        card = host_card()
        try:
            return keep_outputs(keep=lambda out: out.detach().cpu(), card=card)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)

    return measured(kept_on_the_host)


def workaround4_checkpointing(device, precision):
    def checkpointed(model, x):
        from torch.utils.checkpoint import checkpoint_sequential

        try:
            return checkpoint_sequential(model, 4, x, use_reentrant=False)
        except TypeError:  # releases before use_reentrant existed
            return checkpoint_sequential(model, 4, x)

    return measured(lambda: deep_activations(checkpointed))


def deadend1_max_split_size(device, precision):
    def max_split_size():
        settings = getattr(getattr(torch.cuda, "memory", None), "_set_allocator_settings", None)
        if settings is None:
            raise Unsupported(
                "torch.cuda.memory._set_allocator_settings is missing: max_split_size_mb cannot be set after start-up"
            )
        settings("max_split_size_mb:128")

    return measured(batch_too_large, before=max_split_size)


def deadend2_empty_cache(device, precision):
    return measured(lambda: keep_outputs(after_batch=torch.cuda.empty_cache))


def control_small_batch(device, precision):
    def small_batch():
        model = nn.Linear(WIDTH, WIDTH).cuda()
        n = rows(0.05)
        model(torch.randn(n, WIDTH, device="cuda")).pow(2).mean().backward()
        return (n, *finite_grads(model))

    return measured(small_batch)


VARIANTS = {
    "baseline-batch-too-large": baseline_batch_too_large,
    "baseline-deep-activations": baseline_deep_activations,
    "baseline-keep-outputs": baseline_keep_outputs,
    "workaround1-micro-batches": workaround1_micro_batches,
    "workaround2-amp": workaround2_amp,
    "workaround3-detach-to-cpu": workaround3_detach_to_cpu,
    "workaround4-checkpointing": workaround4_checkpointing,
    "deadend1-max-split-size": deadend1_max_split_size,
    "deadend2-empty-cache": deadend2_empty_cache,
    # a GPU with more memory: a purchase, not something a script can apply
    "deadend3-bigger-gpu": None,
    "control-small-batch": control_small_batch,
}
