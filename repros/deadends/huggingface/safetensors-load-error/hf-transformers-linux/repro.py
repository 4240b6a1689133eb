"""Reproducer: "OSError: Error no file named model.safetensors found in directory or unable to
load safetensors file" (deadends/huggingface/safetensors-load-error/hf-transformers-linux).

A small randomly initialised GPT-2 (transformers, built from its config: no Hub) saved with
save_pretrained to a local folder that stands for the Hub's copy; a second folder, the local
cache, is a copy of it whose weights file went missing or was cut short, or the model's
only weights are a pickled pytorch_model.bin. from_pretrained(cache) then fails. Each
variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/huggingface/safetensors-load-error/hf-transformers-linux);
transformers comes from the harness (entry.yaml `requires`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

import torch
from reprokit import Unsupported


def transformers_gpt2():
    try:
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as exc:  # the harness installs it (entry.yaml requires)
        raise Unsupported("transformers does not import here: %s" % exc)
    if hasattr(transformers, "logging"):
        transformers.logging.set_verbosity_error()
    return GPT2Config, GPT2LMHeadModel


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def truncate(folder):
    path = os.path.join(folder, "model.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])  # a download cut off halfway


def remove_weights(folder):
    os.remove(os.path.join(folder, "model.safetensors"))


def fetch(hub, cache):
    """The Hub's copy fetched into the cache (a fresh copy of every file)."""
    shutil.rmtree(cache, ignore_errors=True)
    shutil.copytree(hub, cache)


def saved(precision, damage=None, pickled=False, fix=None, load_options=None) -> dict:
    """A GPT-2 saved to ``hub`` (safetensors, or only a pickled pytorch_model.bin), fetched
    into ``cache``, ``damage(cache)``-d, ``fix(hub, cache)``-ed, then
    from_pretrained(cache, **load_options): whether its weights came back."""
    if precision != "fp32":
        raise Unsupported("a weights file's format does not depend on precision: fp32 only")
    config_class, model_class = transformers_gpt2()
    folder = tempfile.mkdtemp(prefix="kb-safetensors-")
    try:
        hub, cache = os.path.join(folder, "hub"), os.path.join(folder, "cache")
        config = config_class(
            n_layer=1,
            n_embd=16,
            n_head=2,
            vocab_size=64,
            n_positions=16,
            bos_token_id=0,
            eos_token_id=0,
        )
        torch.manual_seed(0)
        model = model_class(config)
        model.save_pretrained(hub)
        if pickled:  # the model's only weights a pickled state_dict, as older repositories hold
            for name in os.listdir(hub):
                if name.endswith(".safetensors") or name.endswith(".json") and "index" in name:
                    os.remove(os.path.join(hub, name))
            torch.save(model.state_dict(), os.path.join(hub, "pytorch_model.bin"))
        fetch(hub, cache)
        if damage is not None:
            damage(cache)
        if fix is not None:
            fix(hub, cache)
        loaded = model_class.from_pretrained(cache, **(load_options or {}))
        want, got = model.state_dict(), loaded.state_dict()
        same = [k for k in want if k in got and torch.equal(got[k], want[k])]
        return {
            "weights_restored": {
                "ok": len(same) == len(want),
                "detail": "%d of %d saved tensors came back equal" % (len(same), len(want)),
            }
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def baseline_weights_missing(device, precision):
    return saved(precision, damage=remove_weights)


def baseline_truncated_download(device, precision):
    return saved(precision, damage=truncate)


def baseline_pickled_only(device, precision):
    return saved(precision, pickled=True, load_options={"use_safetensors": True})


def workaround1_clear_cache_refetch(device, precision):
    return saved(precision, damage=truncate, fix=fetch)


def workaround2_use_safetensors_false(device, precision):
    return saved(precision, pickled=True, load_options={"use_safetensors": False})


def workaround3_checksum_then_refetch(device, precision):
    def verify(hub, cache):
        name = "model.safetensors"
        here = os.path.join(cache, name)
        if not os.path.exists(here) or sha256(here) != sha256(os.path.join(hub, name)):
            fetch(hub, cache)  # the checksum disagrees with the source's: fetched again

    return saved(precision, damage=truncate, fix=verify)


def deadend1_convert_by_hand(device, precision):
    def convert(hub, cache):
        try:
            from safetensors.torch import save_file
        except ImportError as exc:
            raise Unsupported("safetensors is not installed: %s" % exc)
        state = torch.load(os.path.join(cache, "pytorch_model.bin"), map_location="cpu")
        save_file(state, os.path.join(cache, "model.safetensors"))

    return saved(precision, pickled=True, fix=convert, load_options={"use_safetensors": True})


def deadend2_always_use_safetensors_false(device, precision):
    return saved(precision, damage=truncate, load_options={"use_safetensors": False})


def control_intact_cache(device, precision):
    return saved(precision)


VARIANTS = {
    "baseline-weights-missing": baseline_weights_missing,
    "baseline-truncated-download": baseline_truncated_download,
    "baseline-pickled-only": baseline_pickled_only,
    "workaround1-clear-cache-refetch": workaround1_clear_cache_refetch,
    "workaround2-use-safetensors-false": workaround2_use_safetensors_false,
    "workaround3-checksum-then-refetch": workaround3_checksum_then_refetch,
    "deadend1-convert-by-hand": deadend1_convert_by_hand,
    "deadend2-always-use-safetensors-false": deadend2_always_use_safetensors_false,
    "control-intact-cache": control_intact_cache,
}
