"""Reproducer: "OutOfMemoryError: CUDA out of memory (Transformers)"
(deadends/huggingface/cuda-oom-transformers/hf4-linux).

One AdamW training step of a small randomly initialised GPT-2 (transformers, built from
its config: no Hub) on a batch of BATCH sequences of SEQ tokens, its language-model loss
computed by transformers (labels = the ids). The card is made to measure on any GPU: the
full batch's fp32 step is run once uncapped, its peak memory taken, and this process capped
(torch.cuda.set_per_process_memory_fraction) at that peak divided by OVER, so that the step
needs OVER times the card (reprokit.on_capped_card). Each variant applies one workaround of
https://deadends.dev/huggingface/cuda-oom-transformers/hf4-linux under that cap. CUDA cells
only; train_step runs on any device (tests exercise it on the CPU). transformers comes from
the harness (entry.yaml `requires`; on the GPU box, from its wheel folder).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, finite, from_transformers, moved, needs_cuda, on_capped_card

BATCH, SEQ = 64, 512  # the full batch: activations far larger than the weights
LAYERS, WIDTH, HEADS, VOCAB = 4, 512, 8, 1024
OVER = 1.4  # how much more than the card the full batch's fp32 step needs


def gpt2_class():
    GPT2Config, GPT2LMHeadModel = from_transformers("GPT2Config", "GPT2LMHeadModel")
    return GPT2Config, GPT2LMHeadModel


def make_model(device, layers=LAYERS, width=WIDTH, heads=HEADS, seq=SEQ):
    config_class, model_class = gpt2_class()
    config = config_class(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=VOCAB,
        n_positions=seq,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    return model_class(config).to(device).train()


def train_step(device, batch=BATCH, dtype=None, checkpointing=False, seq=SEQ, **sizes):
    """One AdamW step of the model on ``batch`` sequences, the model's weights (and so its
    gradients and Adam's moments) in ``dtype`` where given (model.half(): the workaround's
    words), gradient checkpointing on where asked (transformers' own switch). Its
    postconditions: the loss is finite, every weight changed, every weight is finite after
    the step, and (``dtype``) the step really ran in it."""
    model = make_model(device, seq=seq, **sizes)
    if dtype is not None:
        model = model.to(dtype)
    if checkpointing:
        if not hasattr(model, "gradient_checkpointing_enable"):
            raise Unsupported("this transformers has no gradient_checkpointing_enable")
        model.gradient_checkpointing_enable()
    # kept on the host: a copy on the card would be memory the step itself does not need
    before = {k: p.detach().to("cpu", copy=True) for k, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g).to(device)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    after = dict(model.named_parameters())
    bad = sorted(k for k, p in after.items() if not bool(torch.isfinite(p).all()))
    checks = {
        "loss_finite": finite([out.loss.item()]),
        "params_trained": moved(before, after),
        "params_finite": {
            "ok": not bad,
            "detail": "not finite after the step: %s" % bad
            if bad
            else "every weight finite after the step",
        },
        "samples_per_step": {
            "ok": ids.shape[0] == BATCH,
            "detail": "%d sequences in the step (the batch is %d)" % (ids.shape[0], BATCH),
        },
    }
    if checkpointing:
        on = getattr(model, "is_gradient_checkpointing", None)
        checks["checkpointing_on"] = {
            "ok": bool(on),
            "detail": "model.is_gradient_checkpointing is %r" % (on,),
        }
    if dtype is not None:
        got = sorted({str(p.dtype) for p in after.values()})
        checks["ran_in_half"] = {
            "ok": got == [str(dtype)] and out.logits.dtype == dtype,
            "detail": "weights in %s, logits in %s (asked %s)" % (got, out.logits.dtype, dtype),
        }
    return checks


def without(checks, *names):
    """``checks`` less those a reading does not ask for."""
    return {k: v for k, v in checks.items() if k not in names}


def capped(run):
    """``run()`` on the card the full batch's fp32 step needs OVER times."""
    return on_capped_card(
        lambda: train_step("cuda"),
        lambda card: run(),
        OVER,
        "the fp32 step of %d x %d tokens" % (BATCH, SEQ),
    )


def fp32_only(precision):
    needs_cuda()
    if precision != "fp32":
        raise Unsupported("sized for fp32; the half-precision workarounds set their own")


def baseline(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda"))


def workaround1_half(device, precision):
    """The record's words: model.half(), then the same step (weights, gradients and Adam's
    moments in float16)."""
    needs_cuda()
    if precision != "fp16":
        raise Unsupported("model.half() is float16")
    return capped(lambda: train_step("cuda", dtype=torch.float16))


def workaround1_bfloat16(device, precision):
    """The sensible reading of "half": the weights in bfloat16 (float32's range), then the
    same step."""
    needs_cuda()
    if precision != "bf16":
        raise Unsupported("this reading is bfloat16")
    if not torch.cuda.is_bf16_supported():
        raise Unsupported("this GPU has no bfloat16")
    return capped(lambda: train_step("cuda", dtype=torch.bfloat16))


def workaround2_gradient_checkpointing(device, precision):
    fp32_only(precision)
    return capped(lambda: train_step("cuda", checkpointing=True))


def control_quarter_batch(device, precision):
    fp32_only(precision)
    return capped(lambda: without(train_step("cuda", batch=BATCH // 4), "samples_per_step"))


VARIANTS = {
    "baseline": baseline,
    "workaround1-half": workaround1_half,
    "workaround1-bfloat16": workaround1_bfloat16,
    "workaround2-gradient-checkpointing": workaround2_gradient_checkpointing,
    "control-quarter-batch": control_quarter_batch,
}
