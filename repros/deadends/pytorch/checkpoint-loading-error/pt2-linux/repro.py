"""Reproducer: "Error(s) in loading state_dict" (deadends/pytorch/checkpoint-loading-error/pt2-linux).

A checkpoint saved from one model loaded into another whose parameter names differ: a
checkpoint written from inside nn.DataParallel (every key prefixed "module."), or a model
that gained a layer since the checkpoint was written. Each variant applies one workaround or
dead end of the knowledge-base entry
(https://deadends.dev/pytorch/checkpoint-loading-error/pt2-linux). The model class lives in a
real module file written next to the checkpoint, as a project's model would.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile

import torch
from reprokit import no_code_ran, payload

MODEL_SOURCE = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, extra=False):
        super().__init__()
        self.body = nn.Linear(6, 4)
        self.head = nn.Linear(4, 2)
        self.extra = nn.Linear(2, 2) if extra else None

    def forward(self, x):
        out = self.head(torch.relu(self.body(x)))
        return out if self.extra is None else out + self.extra(out)
"""


def model_module(folder: str, source: str = MODEL_SOURCE):
    """The project's model module as ``source`` writes it, (re)imported from ``folder``."""
    path = os.path.join(folder, "kb_checkpoint_model.py")
    with open(path, "w") as f:
        f.write(source)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    sys.modules.pop("kb_checkpoint_model", None)
    importlib.invalidate_caches()
    return importlib.import_module("kb_checkpoint_model")


def checkpoint(device, restore, prefixed=False, extra=False) -> dict:
    """A model saved (its state dict, keys "module."-``prefixed`` as nn.DataParallel writes
    them) and ``restore(saved, model, path, state)`` into a fresh model (with an ``extra``
    layer), which returns (the model to check, a note)."""
    folder = tempfile.mkdtemp(prefix="kb-ckpt-")
    try:
        mod = model_module(folder)
        torch.manual_seed(0)
        saved = mod.Net().to(device)
        path = os.path.join(folder, "ckpt.pt")
        state = saved.state_dict()
        if prefixed:
            state = {"module." + k: v for k, v in state.items()}
        torch.manual_seed(1)  # the fresh model starts from other weights
        model, note = restore(saved, mod.Net(extra=extra).to(device), path, state)
        got = model.state_dict()
        ref = saved.state_dict()
        same = [k for k in ref if k in got and torch.equal(got[k].cpu(), ref[k].cpu())]
        return {
            "saved_weights_restored": {
                "ok": len(same) == len(ref),
                "detail": "%d of %d saved tensors restored (%s). %s"
                % (len(same), len(ref), ", ".join(sorted(ref)), note),
            }
        }
    finally:
        sys.path.remove(folder)
        sys.modules.pop("kb_checkpoint_model", None)
        shutil.rmtree(folder, ignore_errors=True)


def load_state(load=None):
    """torch.save(state) / torch.load, then ``load(model, loaded)`` -> a note (default: a
    strict model.load_state_dict)."""

    def restore(saved, model, path, state):
        torch.save(state, path)
        loaded = torch.load(path)
        if load is None:
            model.load_state_dict(loaded)
            return model, ""
        return model, load(model, loaded)

    return restore


def baseline_module_prefix(device, precision):
    return checkpoint(device, load_state(), prefixed=True)


def baseline_added_layer(device, precision):
    return checkpoint(device, load_state(), extra=True)


def workaround1_strict_false_after_check(device, precision):
    def only_the_new_layer_missing(model, loaded):
        want = set(model.state_dict())
        missing = sorted(want - set(loaded))
        unexpected = sorted(set(loaded) - want)
        if unexpected or any(not k.startswith("extra.") for k in missing):
            raise RuntimeError(
                "checkpoint mismatch beyond the new layer: missing %s, unexpected %s"
                % (missing, unexpected)
            )
        model.load_state_dict(loaded, strict=False)
        return "only the new layer's keys are missing: %s" % missing

    return checkpoint(device, load_state(only_the_new_layer_missing), extra=True)


def workaround2_rename_keys(device, precision):
    def strip_prefix(model, loaded):
        prefix = "module."
        model.load_state_dict(
            {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in loaded.items()}
        )
        return ""

    return checkpoint(device, load_state(strip_prefix), prefixed=True)


def deadend1_strict_false(device, precision):
    def not_strict(model, loaded):
        result = model.load_state_dict(loaded, strict=False)
        return "strict=False reported %d missing and %d unexpected keys" % (
            len(result.missing_keys),
            len(result.unexpected_keys),
        )

    return checkpoint(device, load_state(not_strict), prefixed=True)


def deadend2_pickle_model_literal(device, precision):
    def whole_model(saved, model, path, state):
        torch.save(saved, path)
        return torch.load(path), ""

    return checkpoint(device, whole_model)


def deadend2_pickle_model_weights_only_false(device, precision):
    """The whole model pickled, then the project's code moves on (the class renamed in a
    refactor, as the next release of a project does) before the checkpoint is loaded, with
    weights_only=False where that argument exists: the pickle names a class that is gone."""

    def whole_model(saved, model, path, state):
        torch.save(saved, path)
        folder = os.path.dirname(path)
        model_module(folder, MODEL_SOURCE.replace("class Net(", "class Classifier("))
        try:
            return torch.load(path, weights_only=False), "loaded after the refactor"
        except TypeError as exc:  # torch.load has no weights_only argument here
            if "weights_only" not in str(exc):
                raise
            return torch.load(path), "loaded after the refactor (no weights_only argument here)"

    return checkpoint(device, whole_model)


def deadend2_pickle_model_payload(device, precision):
    """The document's other reason, the security risk, measured: the whole model pickled as
    the dead end does, in a file that also carries a payload (as a file from elsewhere may),
    loaded as a whole model has to be: torch.load(path, weights_only=False) where that
    argument exists (from torch 2.6 the default refuses the pickled class), torch.load(path)
    before it. Did code from the file run on load?"""
    found = {}

    def whole_model(saved, model, path, state):
        carrier, marker = payload(os.path.dirname(path))
        saved.provenance = carrier  # an attribute the pickle carries with the model
        torch.save(saved, path)
        try:
            loaded, how = torch.load(path, weights_only=False), "torch.load(weights_only=False)"
        except TypeError as exc:  # torch.load has no weights_only argument here
            if "weights_only" not in str(exc):
                raise
            loaded, how = torch.load(path), "torch.load (no weights_only argument here)"
        found["check"] = no_code_ran(marker, how)
        return loaded, how

    checks = checkpoint(device, whole_model)
    checks["no_code_ran_on_load"] = found["check"]
    return checks


def control_same_model(device, precision):
    return checkpoint(device, load_state())


VARIANTS = {
    "baseline-module-prefix": baseline_module_prefix,
    "baseline-added-layer": baseline_added_layer,
    "workaround1-strict-false-after-check": workaround1_strict_false_after_check,
    "workaround2-rename-keys": workaround2_rename_keys,
    "deadend1-strict-false": deadend1_strict_false,
    "deadend2-pickle-model-literal": deadend2_pickle_model_literal,
    "deadend2-pickle-model-weights-only-false": deadend2_pickle_model_weights_only_false,
    "deadend2-pickle-model-payload": deadend2_pickle_model_payload,
    "control-same-model": control_same_model,
}
