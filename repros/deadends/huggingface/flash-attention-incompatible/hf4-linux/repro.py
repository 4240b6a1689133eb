"""Reproducer: "ImportError: Flash Attention 2 not compatible with this model"
(deadends/huggingface/flash-attention-incompatible/hf4-linux).

A small randomly initialised GPT-2 (transformers, built from its config: no Hub) asked for
attn_implementation="flash_attention_2": on a machine without the flash-attn package (every
CPU cell), and as an architecture that declares no Flash Attention 2 support (GPT-2's
support flags, which transformers reads for every model class, turned off while it is built).
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/huggingface/flash-attention-incompatible/hf4-linux) and compares the
model's output with the eager attention's; transformers comes from the harness (entry.yaml
`requires`).
"""

from __future__ import annotations

import copy

import torch
from reprokit import Unsupported

FLAGS = ("_supports_flash_attn", "_supports_flash_attn_2")


def gpt2():
    try:
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:  # the harness installs it (entry.yaml requires)
        raise Unsupported("transformers does not import here: %s" % exc)
    transformers.logging.set_verbosity_error()
    if not hasattr(GPT2LMHeadModel, "_from_config"):
        raise Unsupported(
            "this transformers has no attn_implementation (PreTrainedModel._from_config)"
        )
    config = GPT2Config(
        n_layer=1,
        n_embd=16,
        n_head=2,
        vocab_size=64,
        n_positions=16,
        bos_token_id=0,
        eos_token_id=0,
    )
    return config, GPT2LMHeadModel


def build(config, model_class, impl, flash_flags=True):
    """``model_class`` built with ``impl``; with ``flash_flags`` False the class declares no
    Flash Attention 2 support while it is built (its flags restored after)."""
    torch.manual_seed(0)
    saved = {flag: model_class.__dict__[flag] for flag in FLAGS if flag in model_class.__dict__}
    if not flash_flags:
        for flag in FLAGS:
            setattr(model_class, flag, False)
    try:
        # a copy each: _from_config records the implementation on the config it is given
        return model_class._from_config(copy.deepcopy(config), attn_implementation=impl).eval()
    finally:
        for flag in FLAGS:
            if flag in saved:
                setattr(model_class, flag, saved[flag])
            elif flag in model_class.__dict__:
                delattr(model_class, flag)


def compared(precision, impl, flash_flags=True, force=None) -> dict:
    """The model built with ``impl`` (see ``build``; ``impl`` may be a function of the class
    and its flags), its attention then ``force``-d, run on a batch: its logits against the
    eager attention's."""
    if precision != "fp32":
        raise Unsupported("which attention a model accepts does not depend on precision: fp32 only")
    config, model_class = gpt2()
    asked = impl(model_class, flash_flags) if callable(impl) else impl
    model = build(config, model_class, asked, flash_flags)
    if force is not None:
        force(model)
    reference = build(config, model_class, "eager")
    ids = torch.arange(12).view(2, 6) % 64
    with torch.no_grad():
        got, want = model(ids).logits, reference(ids).logits
    used = getattr(model.config, "_attn_implementation", None)
    return {
        "attention_as_asked": {
            "ok": used == asked,
            "detail": "asked %r, the model uses %r" % (asked, used),
        },
        "logits_match_eager": {
            "ok": bool(torch.allclose(got, want, atol=1e-5)),
            "detail": "max |logits - eager logits| = %.3g" % (got - want).abs().max().item(),
        },
    }


def first_supported(model_class, flash_flags):
    """What the model class declares it supports, as its card would say: flash only where the
    class supports it and flash-attn imports, else sdpa, else eager."""
    try:
        import flash_attn  # noqa: F401

        flash = flash_flags and any(getattr(model_class, flag, False) for flag in FLAGS)
    except ImportError:
        flash = False
    if flash:
        return "flash_attention_2"
    return "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"


def baseline_flash_attn_not_installed(device, precision):
    return compared(precision, "flash_attention_2")


def baseline_architecture_without_support(device, precision):
    return compared(precision, "flash_attention_2", flash_flags=False)


def workaround1_supported_implementation(device, precision):
    return compared(precision, first_supported, flash_flags=False)


def workaround2_sdpa(device, precision):
    return compared(precision, "sdpa", flash_flags=False)


def deadend1_force_flash_attention(device, precision):
    def force(model):
        # built with eager, then switched by hand, past transformers' checks
        model.config._attn_implementation_internal = "flash_attention_2"

    return compared(precision, "eager", flash_flags=False, force=force)


def control_eager(device, precision):
    return compared(precision, "eager", flash_flags=False)


VARIANTS = {
    "baseline-flash-attn-not-installed": baseline_flash_attn_not_installed,
    "baseline-architecture-without-support": baseline_architecture_without_support,
    "workaround1-supported-implementation": workaround1_supported_implementation,
    "workaround2-sdpa": workaround2_sdpa,
    "deadend1-force-flash-attention": deadend1_force_flash_attention,
    "control-eager": control_eager,
}
