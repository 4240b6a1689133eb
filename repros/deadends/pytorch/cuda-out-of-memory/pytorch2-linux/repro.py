"""Reproducer: "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
(deadends/pytorch/cuda-out-of-memory/pytorch2-linux).

Three ways a training or evaluation loop runs out of GPU memory, each sized from the free
memory of the device it runs on (so the same script exhausts any GPU): a batch whose layer
output no longer fits, a deep stack whose saved activations do not fit, and an evaluation
loop that keeps every output with its graph. Each variant applies one workaround or dead end
of the knowledge-base entry (https://deadends.dev/pytorch/cuda-out-of-memory/pytorch2-linux).
CUDA cells only (skipped elsewhere).

    python repro.py --list
    python repro.py --variant baseline-batch-too-large --device cuda --precision fp32
"""

from __future__ import annotations

import sys
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
    "baseline-batch-too-large": "one batch whose input takes 60% of free memory and whose layer output needs as much again",
    "baseline-deep-activations": "16 layers (Linear, ReLU) on a batch of 8% of free memory: the saved activations need about 130%",
    "baseline-keep-outputs": "an evaluation loop (no torch.no_grad) appending every output, graph attached; 10 batches of 15% each",
    "workaround1-micro-batches": "batch-too-large split into 8 micro-batches with gradient accumulation",
    "workaround2-amp": "deep-activations under torch.autocast('cuda', dtype=float16)",
    "workaround3-detach-to-cpu": "keep-outputs with each output .detach().cpu() before it is kept",
    "workaround4-checkpointing": "deep-activations through torch.utils.checkpoint.checkpoint_sequential in 4 segments",
    "deadend1-max-split-size": "batch-too-large with the caching allocator's max_split_size_mb set to 128",
    "deadend2-empty-cache": "keep-outputs with torch.cuda.empty_cache() after every batch",
    "deadend3-bigger-gpu": "a GPU with more memory: a purchase, not something a script can apply",
    "control-small-batch": "one step on a batch of 5% of free memory",
}
NOT_WRITTEN = ["deadend3-bigger-gpu"]

WIDTH = 256
ROW = WIDTH * 4  # bytes of one float32 row


def rows(fraction: float) -> int:
    free, _total = torch.cuda.mem_get_info()
    return max(1, int(fraction * free / ROW))


def finite_grads(model) -> tuple:
    grads = [p.grad for p in model.parameters()]
    good = sum(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    return good == len(grads), "%d of %d parameters have finite gradients" % (good, len(grads))


def batch_too_large(variant: str) -> tuple:
    model = nn.Linear(WIDTH, WIDTH).cuda()
    n = rows(0.6)
    if variant == "workaround1-micro-batches":
        for _ in range(8):
            x = torch.randn(n // 8, WIDTH, device="cuda")
            model(x).pow(2).mean().div(8).backward()
            del x
    else:
        x = torch.randn(n, WIDTH, device="cuda")
        model(x).pow(2).mean().backward()
    return (n, *finite_grads(model))


def deep_activations(variant: str) -> tuple:
    layers = []
    for _ in range(16):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers).cuda()
    n = rows(0.08)
    x = torch.randn(n, WIDTH, device="cuda", requires_grad=True)
    if variant == "workaround2-amp":
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
    elif variant == "workaround4-checkpointing":
        from torch.utils.checkpoint import checkpoint_sequential

        try:
            out = checkpoint_sequential(model, 4, x, use_reentrant=False)
        except TypeError:  # releases before use_reentrant existed
            out = checkpoint_sequential(model, 4, x)
    else:
        out = model(x)
    out.float().pow(2).mean().backward()
    return (n, *finite_grads(model))


def keep_outputs(variant: str) -> tuple:
    model = nn.Linear(WIDTH, WIDTH).cuda()
    n = rows(0.15)
    kept = []
    for _ in range(10):
        x = torch.randn(n, WIDTH, device="cuda")
        out = model(x)
        kept.append(out.detach().cpu() if variant == "workaround3-detach-to-cpu" else out)
        del x, out
        if variant == "deadend2-empty-cache":
            torch.cuda.empty_cache()
    good = sum(bool(torch.isfinite(k).all()) for k in kept)
    return n * len(kept), good == 10, "%d of 10 batches' outputs kept and finite" % good


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cuda":
        raise Unsupported("CUDA memory needs a CUDA device; this cell is %s" % device)
    if precision != "fp32":
        raise Unsupported("sized for float32; the AMP workaround sets its own precision")
    if not hasattr(torch.cuda, "mem_get_info"):
        raise Unsupported(
            "torch.cuda.mem_get_info (to size the batch from free memory) is missing in torch %s"
            % torch.__version__
        )
    if variant == "deadend1-max-split-size":
        settings = getattr(getattr(torch.cuda, "memory", None), "_set_allocator_settings", None)
        if settings is None:
            raise Unsupported(
                "torch.cuda.memory._set_allocator_settings is missing: max_split_size_mb cannot be set after start-up"
            )
        settings("max_split_size_mb:128")
    torch.manual_seed(0)
    if variant in (
        "baseline-batch-too-large",
        "workaround1-micro-batches",
        "deadend1-max-split-size",
    ):
        n, ok, detail = batch_too_large(variant)
    elif variant in ("baseline-deep-activations", "workaround2-amp", "workaround4-checkpointing"):
        n, ok, detail = deep_activations(variant)
    elif variant.startswith("control"):
        model = nn.Linear(WIDTH, WIDTH).cuda()
        n = rows(0.05)
        model(torch.randn(n, WIDTH, device="cuda")).pow(2).mean().backward()
        ok, detail = finite_grads(model)
    else:
        n, ok, detail = keep_outputs(variant)
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


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
