"""Reproducer: "Error(s) in loading state_dict: Missing key(s) ... Unexpected key(s) ..."
(deadends.dev pytorch/state-dict-key-mismatch/torch2-linux).

A model wrapped in nn.DataParallel is saved (its keys carry the "module." prefix) and
loaded into the plain model; the layer is named ``layer4`` as in the documented message.
Every variant that loads must leave the fresh model with the saved weights (same outputs).
nn.DataParallel wraps on CPU too (it runs the module directly without GPUs).
"""

from __future__ import annotations

import io

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1 = nn.Linear(6, 8)
        self.layer4 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer4(torch.relu(self.layer1(x)))


def roundtrip(state: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def save_and_load(device, save="wrapped", fix=None, strict=True) -> dict:
    """The trained model saved ``save``: "wrapped" in nn.DataParallel, its "unwrapped"
    module, or "plain"; ``fix(fresh, checkpoint, notes)`` -> the checkpoint to load into a
    fresh model (with ``strict``); the fresh model must then hold the saved weights."""
    torch.manual_seed(0)
    trained = Net().to(device)
    x = torch.randn(5, 6, device=device)
    want = trained(x).detach()
    if save == "plain":
        checkpoint = roundtrip(trained.state_dict())
    else:
        wrapped = nn.DataParallel(trained)
        source = wrapped.module if save == "unwrapped" else wrapped
        checkpoint = roundtrip(source.state_dict())
    torch.manual_seed(1)  # a fresh model with other weights
    fresh = Net().to(device)
    notes = ["checkpoint keys %s" % sorted(checkpoint)]
    if fix is not None:
        checkpoint = fix(fresh, checkpoint, notes)
    result = fresh.load_state_dict(checkpoint, strict=strict)
    notes.append("load_state_dict returned %s" % (result,))
    got = fresh(x).detach()
    same = {
        name: bool(torch.equal(p.detach(), trained.state_dict()[name]))
        for name, p in fresh.state_dict().items()
    }
    return {
        "weights_loaded": {
            "ok": all(same.values()),
            "detail": "parameter equal to the saved one: %s; %s" % (same, "; ".join(notes)),
        },
        "same_outputs": {
            "ok": bool(torch.allclose(got, want)),
            "detail": "max |output difference| %s" % (got - want).abs().max().item(),
        },
    }


def compare_keys(map_suffixes):
    """Compare the key sets (and map each missing key to the unexpected key it is a suffix
    of, where ``map_suffixes``)."""

    def fix(fresh, checkpoint, notes):
        model_keys = set(fresh.state_dict().keys())
        ckpt_keys = set(checkpoint.keys())
        missing, unexpected = model_keys - ckpt_keys, ckpt_keys - model_keys
        print("Missing:", sorted(missing))
        print("Unexpected:", sorted(unexpected))
        notes.append("missing %s, unexpected %s" % (sorted(missing), sorted(unexpected)))
        if not map_suffixes:
            return checkpoint
        mapping = {}
        for key in missing:
            found = [u for u in unexpected if u.endswith("." + key)]
            if len(found) == 1:
                mapping[found[0]] = key
        notes.append("mapping %s" % mapping)
        return {mapping.get(k, k): v for k, v in checkpoint.items()}

    return fix


def baseline_dataparallel_prefix(device, precision):
    return save_and_load(device)


def workaround1_strip_prefix(device, precision):
    def strip(fresh, checkpoint, notes):
        return {k.replace("module.", ""): v for k, v in checkpoint.items()}

    return save_and_load(device, fix=strip)


def workaround2_save_unwrapped(device, precision):
    return save_and_load(device, "unwrapped")


def key_check(device, faulty="wrapped", good="plain") -> dict:
    """The workaround's literal reading is a check ("compare keys to diagnose the
    mismatch"), judged by detection: comparing the model's keys with the checkpoint's must
    flag the ``faulty`` checkpoint (missing and unexpected keys found) and pass the ``good``
    one (none found). Nothing is loaded: what the check finds is the measurement."""
    torch.manual_seed(0)
    trained = Net().to(device)
    fresh = Net().to(device)
    model_keys = set(fresh.state_dict().keys())
    found = {}
    for label, save in (("faulty", faulty), ("good", good)):
        source = nn.DataParallel(trained) if save == "wrapped" else trained
        ckpt_keys = set(roundtrip(source.state_dict()).keys())
        found[label] = (sorted(model_keys - ckpt_keys), sorted(ckpt_keys - model_keys))
        print("%s checkpoint: missing %s, unexpected %s" % (label, *found[label]))
    return {
        "flags_the_faulty_checkpoint": {
            "ok": bool(found["faulty"][0] or found["faulty"][1]),
            "detail": "the %s checkpoint: missing %s, unexpected %s" % (faulty, *found["faulty"]),
        },
        "passes_a_good_checkpoint": {
            "ok": not (found["good"][0] or found["good"][1]),
            "detail": "the %s checkpoint: missing %s, unexpected %s" % (good, *found["good"]),
        },
    }


def workaround3_compare_keys_literal(device, precision):
    return key_check(device)


def workaround3_compare_keys_then_map(device, precision):
    return save_and_load(device, fix=compare_keys(map_suffixes=True))


def deadend1_strict_false(device, precision):
    return save_and_load(device, strict=False)


def deadend2_rename_every_key(device, precision):
    def rename(fresh, checkpoint, notes):
        return {
            "layer1.weight": checkpoint["module.layer1.weight"],
            "layer1.bias": checkpoint["module.layer1.bias"],
            "layer4.weight": checkpoint["module.layer4.weight"],
            "layer4.bias": checkpoint["module.layer4.bias"],
        }

    return save_and_load(device, fix=rename)


def control_plain_save_load(device, precision):
    return save_and_load(device, "plain")


VARIANTS = {
    "baseline-dataparallel-prefix": baseline_dataparallel_prefix,
    "workaround1-strip-prefix": workaround1_strip_prefix,
    "workaround2-save-unwrapped": workaround2_save_unwrapped,
    "workaround3-compare-keys-literal": workaround3_compare_keys_literal,
    "workaround3-compare-keys-then-map": workaround3_compare_keys_then_map,
    "deadend1-strict-false": deadend1_strict_false,
    "deadend2-rename-every-key": deadend2_rename_every_key,
    "control-plain-save-load": control_plain_save_load,
}
