"""Reproducer: "torch.cuda.OutOfMemoryError: CUDA out of memory during model.generate()"
(deadends/huggingface/generate-oom/hf-transformers-linux).

Greedy model.generate of a small randomly initialised GPT-2 (transformers, built from its
config: no Hub) for a batch of BATCH prompts of PROMPT tokens: its KV cache (two tensors per
layer, growing by one position a step) is what fills the card. The card is made to measure
on any GPU: the baseline's fp32 generation of LONG new tokens is run once uncapped, its peak
memory taken, and this process capped (torch.cuda.set_per_process_memory_fraction) at that
peak divided by OVER (reprokit.on_capped_card). Each variant applies one workaround or dead
end of https://deadends.dev/huggingface/generate-oom/hf-transformers-linux under that cap.
CUDA cells only; generate runs on any device (tests exercise it on the CPU). transformers
comes from the harness (entry.yaml `requires`; on the GPU box, from its wheel folder).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, from_transformers, needs_cuda, on_capped_card

BATCH, PROMPT = 64, 32
LONG = 512  # the new tokens the baseline asks for
LAYERS, WIDTH, HEADS, VOCAB = 4, 512, 8, 1024
POSITIONS = PROMPT + 2 * LONG  # room for dead end 1's "very high" limit
OVER = 1.4  # how much more than the card the baseline's generation needs


def gpt2_class():
    GPT2Config, GPT2LMHeadModel = from_transformers("GPT2Config", "GPT2LMHeadModel")
    return GPT2Config, GPT2LMHeadModel


def make_model(device, dtype=None, layers=LAYERS, width=WIDTH, heads=HEADS):
    config_class, model_class = gpt2_class()
    config = config_class(
        n_layer=layers,
        n_embd=width,
        n_head=heads,
        vocab_size=VOCAB,
        n_positions=POSITIONS,
        bos_token_id=0,
        eos_token_id=VOCAB - 1,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = model_class(config).eval()
    if dtype is not None:  # the record's torch_dtype=...: the weights, so the cache, in it
        model = model.to(dtype)
    return model.to(device)


class Counted:
    """A streamer (transformers' put/end protocol): the tokens it was handed, step by step."""

    def __init__(self):
        self.steps = 0
        self.ended = False

    def put(self, value):
        self.steps += 1

    def end(self):
        self.ended = True


def generate(device, new_tokens, dtype=None, streamer=None, batch=BATCH, before=None, **sizes):
    """Greedy generation of exactly ``new_tokens`` tokens (min_new_tokens too: no early end)
    for ``batch`` prompts, weights in ``dtype`` where given; ``before(model, ids)`` runs
    first (dead end 2's earlier call). Its postconditions: every new token was generated (no
    stopping criterion cut the run short), (``dtype``) the model and its logits were in it,
    and (``streamer``) the streamer was handed every token."""
    model = make_model(device, dtype, **sizes)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB - 1, (batch, PROMPT), generator=g).to(device)
    mask = torch.ones_like(ids)
    if before is not None:
        before(model, ids, mask)
    kwargs = {"streamer": streamer} if streamer is not None else {}
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
            **kwargs,
        )
        probe = model(input_ids=ids[:1, :4]).logits  # the dtype the forward really ran in
    made = out.shape[1] - PROMPT
    checks = {
        "generated_all_tokens": {
            "ok": made == new_tokens,
            "detail": "%d new tokens for each of %d prompts (asked %d)"
            % (made, out.shape[0], new_tokens),
        },
    }
    if dtype is not None:
        got = sorted({str(p.dtype) for p in model.parameters()})
        checks["ran_in_half"] = {
            "ok": got == [str(dtype)] and probe.dtype == dtype,
            "detail": "weights in %s, logits in %s (asked %s)" % (got, probe.dtype, dtype),
        }
    if streamer is not None:
        # put() gets the prompt once, then each new token
        checks["streamed_every_token"] = {
            "ok": streamer.steps == new_tokens + 1 and streamer.ended,
            "detail": "the streamer was handed %d pieces (the prompt and %d tokens), ended: %s"
            % (streamer.steps, new_tokens, streamer.ended),
        }
    return checks


def capped(run):
    """``run()`` on the card the baseline's fp32 generation needs OVER times."""
    return on_capped_card(
        lambda: generate("cuda", LONG),
        lambda card: run(),
        OVER,
        "generating %d tokens for %d prompts in fp32" % (LONG, BATCH),
    )


def fp32_only(precision):
    needs_cuda()
    if precision != "fp32":
        raise Unsupported("sized for fp32; the lower-precision workaround sets its own")


def baseline(device, precision):
    fp32_only(precision)
    return capped(lambda: generate("cuda", LONG))


def workaround1_float16(device, precision):
    """The record's how: the weights in float16 (torch_dtype=torch.float16)."""
    needs_cuda()
    if precision != "fp16":
        raise Unsupported("torch_dtype=torch.float16 is float16")
    return capped(lambda: generate("cuda", LONG, dtype=torch.float16))


def workaround1_bfloat16(device, precision):
    """ "Lower precision" read as bfloat16, the other half precision."""
    needs_cuda()
    if precision != "bf16":
        raise Unsupported("this reading is bfloat16")
    if not torch.cuda.is_bf16_supported():
        raise Unsupported("this GPU has no bfloat16")
    return capped(lambda: generate("cuda", LONG, dtype=torch.bfloat16))


def workaround3_reasonable_limit_streaming(device, precision):
    """The record's how: max_new_tokens=256 (half of what the baseline asked), the tokens
    handed to a streamer as they come."""
    fp32_only(precision)
    return capped(lambda: generate("cuda", 256, streamer=Counted()))


def deadend1_very_high_limit(device, precision):
    """Twice the baseline's limit, "for better quality"."""
    fp32_only(precision)
    return capped(lambda: generate("cuda", 2 * LONG))


def deadend2_empty_cache_between_calls(device, precision):
    """A short generate call first, torch.cuda.empty_cache() after it, then the
    baseline's."""
    fp32_only(precision)

    def short_then_empty(model, ids, mask):
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=LONG // 4,
                min_new_tokens=LONG // 4,
                do_sample=False,
                pad_token_id=0,
            )
        torch.cuda.empty_cache()

    return capped(lambda: generate("cuda", LONG, before=short_then_empty))


def control_short_generation(device, precision):
    fp32_only(precision)
    return capped(lambda: generate("cuda", LONG // 4))


VARIANTS = {
    "baseline": baseline,
    "workaround1-float16": workaround1_float16,
    "workaround1-bfloat16": workaround1_bfloat16,
    "workaround3-reasonable-limit-streaming": workaround3_reasonable_limit_streaming,
    "deadend1-very-high-limit": deadend1_very_high_limit,
    "deadend2-empty-cache-between-calls": deadend2_empty_cache_between_calls,
    "control-short-generation": control_short_generation,
}
