"""Reproducer: "torch.cuda.OutOfMemoryError: CUDA out of memory"
(deadends/cuda/torch-cuda-oom-new/torch2-a100).

One training step of a deep MLP (16 Linear+ReLU layers) on a batch whose saved activations
need more memory than the card has. The card is made to measure on any GPU: the full batch's
plain fp32 step is run once uncapped and its peak memory taken, and
torch.cuda.set_per_process_memory_fraction caps this process at that peak divided by OVER,
so the baseline asks for 40% more than the card has whether the GPU has 24 GB or 141 GB
(a few GiB, in about a second). Each variant applies one workaround
or dead end of https://deadends.dev/cuda/torch-cuda-oom-new/torch2-a100 under that cap.
CUDA cells only; train_step runs on any device (tests exercise it on the CPU).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from reprokit import (
    Unsupported,
    autocast,
    autocast_dtype,
    finite,
    make_scaler,
    moved,
    needs_cuda,
    on_capped_card,
)
from torch import nn

WIDTH = 1024
DEPTH = 16
BATCH = 16384  # the batch that does not fit
MAX_SKIPPED = 16  # steps the GradScaler may skip while it backs off from 2**16
OVER = 1.4  # how much more than the card's memory the full batch needs


def make_model(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, 1))
    return nn.Sequential(*layers).to(device)


def checkpointed(model, x):
    from torch.utils.checkpoint import checkpoint_sequential

    try:
        return checkpoint_sequential(model, 4, x, use_reentrant=False)
    except TypeError:  # releases before use_reentrant existed
        return checkpoint_sequential(model, 4, x)


def train_step(device, n, micro=1, forward=None, precision="fp32", after=None):
    """One optimizer step over ``n`` samples in ``micro`` micro-batches (gradients
    accumulated), forward by ``forward(model, x)`` (default: model(x)), under autocast for
    fp16/bf16 (a GradScaler for fp16); ``after()`` runs after the step (empty_cache)."""
    dtype = autocast_dtype(device, precision)
    scaler = make_scaler(device)[0] if precision == "fp16" else None
    model = make_model(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    skipped = 0
    while True:
        opt.zero_grad(set_to_none=True)
        losses, seen = [], 0
        for _ in range(micro):
            g = torch.Generator().manual_seed(seen)
            x = torch.randn(n // micro, WIDTH, generator=g).to(device)
            with autocast(device, dtype):
                out = model(x) if forward is None else forward(model, x)
                loss = F.mse_loss(out.float(), torch.ones_like(out, dtype=torch.float32)) / micro
            (scaler.scale(loss) if scaler else loss).backward()
            losses.append(loss.item() * micro)
            seen += x.shape[0]
            del x, out, loss
        if scaler is None:
            opt.step()
            break
        # a step the GradScaler skips (an inf gradient at its first scale, 2**16) is taken
        # again, as training takes the next one: one skipped step is not "did not train"
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() >= scale or skipped >= MAX_SKIPPED:
            break
        skipped += 1
    if after is not None:
        after()
    checks = {
        "loss_finite": finite(losses),
        "params_trained": moved(before, dict(model.named_parameters())),
    }
    if scaler is not None:
        checks["params_trained"]["detail"] += (
            "; %d step(s) skipped by the GradScaler first" % skipped
        )
    checks["samples_per_step"] = {
        "ok": seen == BATCH,
        "detail": "%d samples in one optimizer step (the batch is %d)" % (seen, BATCH),
    }
    return checks


def capped(run):
    """``run()`` (-> postconditions) with this process capped to a card the full batch's
    plain fp32 step needs OVER times (reprokit.on_capped_card: the details say the sizes
    and the peak)."""
    return on_capped_card(
        lambda: train_step("cuda", BATCH), lambda card: run(), OVER, "the batch of %d" % BATCH
    )


def fp32_only(precision):
    if precision != "fp32":
        raise Unsupported("sized for fp32; the mixed-precision workaround sets its own")


def baseline_batch_too_large(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda", BATCH))


def workaround1_halve_batch(device, precision):
    fp32_only(precision)
    # samples_per_step measures the accumulation reading, not this one
    return capped(
        lambda: {k: v for k, v in train_step("cuda", BATCH // 2).items() if k != "samples_per_step"}
    )


def workaround1_accumulate(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda", BATCH, micro=2))


def workaround2_checkpointing(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda", BATCH, forward=checkpointed))


def workaround3_mixed_precision(device, precision):
    if precision == "fp32":
        raise Unsupported("the workaround is fp16 or bf16 autocast")
    needs_cuda()
    autocast_dtype("cuda", precision)  # Unsupported where autocast cannot produce it
    return capped(lambda: train_step("cuda", BATCH, precision=precision))


def deadend1_empty_cache(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda", BATCH, after=torch.cuda.empty_cache))


def deadend2_alloc_conf(device, precision):
    fp32_only(precision)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise Unsupported("CUDA was initialised before the allocator setting could be made")
    # read when the caching allocator starts: the new name and the older one
    os.environ["PYTORCH_ALLOC_CONF"] = "max_split_size_mb:128"
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128"
    return capped(lambda: train_step("cuda", BATCH))


def control_quarter_batch(device, precision):
    fp32_only(precision)
    return capped(
        lambda: {k: v for k, v in train_step("cuda", BATCH // 4).items() if k != "samples_per_step"}
    )


VARIANTS = {
    "baseline-batch-too-large": baseline_batch_too_large,
    "workaround1-halve-batch": workaround1_halve_batch,
    "workaround1-accumulate": workaround1_accumulate,
    "workaround2-checkpointing": workaround2_checkpointing,
    "workaround3-mixed-precision": workaround3_mixed_precision,
    "deadend1-empty-cache": deadend1_empty_cache,
    "deadend2-alloc-conf": deadend2_alloc_conf,
    "control-quarter-batch": control_quarter_batch,
}
