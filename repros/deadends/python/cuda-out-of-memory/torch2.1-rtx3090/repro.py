"""Reproducer: "RuntimeError: CUDA out of memory. Tried to allocate"
(deadends/python/cuda-out-of-memory/torch2.1-rtx3090).

Two ways a training step runs out of a card's memory: a deep MLP (16 Linear+ReLU layers)
on a batch whose saved activations exceed it, and a large model (4 square Linear layers
trained by Adam) whose parameters, gradients and optimizer moments exceed it at any batch.
The record's card is an RTX 3090 (24 GB); the card here is made to measure on any GPU: the MLP's
full-batch fp32 step is run once uncapped and its peak memory taken, and
torch.cuda.set_per_process_memory_fraction caps this process at that peak divided by OVER
(a few GiB, about a second, even on a 141 GB H200); the large model's parameters take
OVER/4 of that card. Each variant applies one workaround or dead end of
https://deadends.dev/python/cuda-out-of-memory/torch2.1-rtx3090 under that cap.
CUDA cells only; train_step runs on any device (tests exercise it on the CPU).
"""

from __future__ import annotations

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
OVER = 1.4  # how much more than the card's memory the full batch needs
# the large model: fp32 parameters of this share of the card, so that with their gradients
# and Adam's two moments (4 copies) training needs OVER times the card at any batch
PARAM_SHARE = OVER / 4
BIG_DEPTH = 4
BIG_BATCH = 64
MAX_SKIPPED = 16  # steps the GradScaler may skip while it backs off from 2**16


def make_model(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, 1))
    return nn.Sequential(*layers).to(device)


def big_width(param_bytes):
    """The width of BIG_DEPTH square Linear layers whose fp32 weights take param_bytes."""
    return max(8, int((param_bytes / 4 / BIG_DEPTH) ** 0.5))


def make_big_model(device, width):
    torch.manual_seed(0)
    layers = []
    for _ in range(BIG_DEPTH):
        layers += [nn.Linear(width, width, bias=False), nn.ReLU()]
    return nn.Sequential(*layers).to(device)


def checkpointed(model, x):
    from torch.utils.checkpoint import checkpoint_sequential

    try:
        return checkpoint_sequential(model, 4, x, use_reentrant=False)
    except TypeError:  # releases before use_reentrant existed
        return checkpoint_sequential(model, 4, x)


def train_step(
    device,
    n,
    micro=1,
    forward=None,
    precision="fp32",
    after=None,
    context=None,
    scale=True,
    width=None,
    batch=None,
):
    """One optimizer step over ``n`` samples in ``micro`` micro-batches (gradients
    accumulated), forward by ``forward(model, x)`` (default: model(x)), under autocast for
    fp16/bf16 (``context()`` instead of torch.autocast where given; a GradScaler for fp16
    unless ``scale`` is False); ``after()`` runs after the step (empty_cache). With
    ``width``, the large model of that width trained by Adam (its memory is the
    parameters'), else the deep MLP trained by SGD (its memory is the activations');
    ``batch`` is the effective batch the step must keep (default BATCH). A step the
    GradScaler skips (an inf gradient at its first scale) is taken again, as training would
    take the next one, so that one step's measurement is not a skipped step."""
    batch = BATCH if batch is None else batch
    dtype = autocast_dtype(device, precision)
    scaler = make_scaler(device)[0] if precision == "fp16" and scale else None
    if width is None:
        model = make_model(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        features = WIDTH
    else:
        model = make_big_model(device, width)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        features = width
    # kept on the host: a copy on the card would be memory the step itself does not need
    before = {k: p.detach().to("cpu", copy=True) for k, p in model.named_parameters()}
    skipped = 0
    while True:
        opt.zero_grad(set_to_none=True)
        losses, seen, produced = [], 0, []
        for _ in range(micro):
            g = torch.Generator().manual_seed(seen)
            x = torch.randn(n // micro, features, generator=g).to(device)
            with autocast(device, dtype) if context is None else context():
                out = model(x) if forward is None else forward(model, x)
                loss = F.mse_loss(out.float(), torch.ones_like(out, dtype=torch.float32)) / micro
            produced.append(out.dtype)
            (scaler.scale(loss) if scaler else loss).backward()
            losses.append(loss.item() * micro)
            seen += x.shape[0]
            del x, out, loss
        if scaler is None:
            opt.step()
            break
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() >= scale or skipped >= MAX_SKIPPED:
            break
        skipped += 1  # the scaler found an inf gradient, skipped the step and backed off
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
        "ok": seen == batch,
        "detail": "%d samples in one optimizer step (the batch is %d)" % (seen, batch),
    }
    if dtype is not None:
        checks["ran_in_half"] = {
            "ok": produced != [] and all(d == dtype for d in produced),
            "detail": "the model's output came out as %s under %s autocast"
            % (sorted({str(d) for d in produced}), dtype),
        }
    return checks


def compiled(model, x):
    """model(x) through torch.compile (inductor), dynamo's cache reset first so that no
    earlier run's recompile limit sends it back to eager."""
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile(model)(x)


def peak_within(peak, eager_peak):
    """The compiled step's peak memory is not above the same step's in eager mode."""
    return {
        "ok": peak <= eager_peak,
        "detail": "compiled step's peak %.0f MiB, eager step's %.0f MiB"
        % (peak / 2**20, eager_peak / 2**20),
    }


def without(checks, *names):
    """``checks`` less those a reading does not ask for."""
    return {k: v for k, v in checks.items() if k not in names}


def capped(run):
    """``run(budget)`` (-> postconditions; ``budget`` the card's size in bytes) with this
    process capped to a card the full batch's plain fp32 step needs OVER times
    (reprokit.on_capped_card: the details say the sizes and the peak)."""
    return on_capped_card(lambda: train_step("cuda", BATCH), run, OVER, "the batch of %d" % BATCH)


def big_step(n):
    """The large model's step at batch ``n`` on the capped card (its width from the card)."""
    return lambda budget: train_step(
        "cuda", n, width=big_width(PARAM_SHARE * budget), batch=BIG_BATCH
    )


def fp32_only(precision):
    needs_cuda()
    if precision != "fp32":
        raise Unsupported("sized for fp32; the mixed-precision workaround sets its own")


def baseline_batch_too_large(device, precision):
    fp32_only(precision)
    return capped(lambda budget: train_step("cuda", BATCH))


def baseline_model_too_large(device, precision):
    fp32_only(precision)
    return capped(big_step(BIG_BATCH))


def workaround1_checkpointing(device, precision):
    fp32_only(precision)
    return capped(lambda budget: train_step("cuda", BATCH, forward=checkpointed))


def workaround3_cuda_amp_autocast(device, precision):
    needs_cuda()
    if precision != "fp16":
        raise Unsupported("torch.cuda.amp.autocast() casts to float16 unless told otherwise")
    if not hasattr(torch.cuda, "amp") or not hasattr(torch.cuda.amp, "autocast"):
        raise Unsupported("this torch has no torch.cuda.amp.autocast")
    return capped(
        lambda budget: train_step(
            "cuda", BATCH, precision="fp16", context=torch.cuda.amp.autocast, scale=False
        )
    )


def workaround3_mixed_precision(device, precision):
    needs_cuda()
    if precision == "fp32":
        raise Unsupported("the workaround is fp16 or bf16 autocast")
    autocast_dtype("cuda", precision)  # Unsupported where autocast cannot produce it
    return capped(lambda budget: train_step("cuda", BATCH, precision=precision))


def deadend1_empty_cache(device, precision):
    fp32_only(precision)
    return capped(lambda budget: train_step("cuda", BATCH, after=torch.cuda.empty_cache))


def deadend2_batch_one(device, precision):
    fp32_only(precision)
    # the literal reading accepts the smaller batch: samples_per_step is not asked
    return capped(lambda budget: without(train_step("cuda", 1), "samples_per_step"))


def deadend2_batch_one_large_model(device, precision):
    fp32_only(precision)
    return capped(lambda budget: without(big_step(1)(budget), "samples_per_step"))


def control_quarter_batch(device, precision):
    fp32_only(precision)
    return capped(lambda budget: without(train_step("cuda", BATCH // 4), "samples_per_step"))


def peak_of(run):
    """``run()``'s result and the peak memory it allocated on the GPU."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    result = run()
    torch.cuda.synchronize()
    return result, torch.cuda.max_memory_allocated()


def deadend3_compile(device, precision):
    fp32_only(precision)
    return capped(lambda budget: train_step("cuda", BATCH, forward=compiled))


def deadend3_compile_peak(device, precision):
    fp32_only(precision)

    def run(budget):
        n = BATCH // 4
        eager_peak = peak_of(lambda: train_step("cuda", n))[1]
        checks, peak = peak_of(lambda: train_step("cuda", n, forward=compiled))
        checks = without(checks, "samples_per_step")
        checks["peak_within_eager"] = peak_within(peak, eager_peak)
        return checks

    return capped(run)


VARIANTS = {
    "baseline-batch-too-large": baseline_batch_too_large,
    "baseline-model-too-large": baseline_model_too_large,
    "workaround1-checkpointing": workaround1_checkpointing,
    "workaround3-cuda-amp-autocast": workaround3_cuda_amp_autocast,
    "workaround3-mixed-precision": workaround3_mixed_precision,
    "deadend1-empty-cache": deadend1_empty_cache,
    "deadend2-batch-one": deadend2_batch_one,
    "deadend2-batch-one-large-model": deadend2_batch_one_large_model,
    "deadend3-compile": deadend3_compile,
    "deadend3-compile-peak": deadend3_compile_peak,
    "control-quarter-batch": control_quarter_batch,
}
