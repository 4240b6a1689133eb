"""Reproducer: "Error(s) in loading state_dict" (deadends/pytorch/checkpoint-loading-error/pt2-linux).

A checkpoint saved from one model loaded into another whose parameter names differ: a
checkpoint written from inside nn.DataParallel (every key prefixed "module."), or a model
that gained a layer since the checkpoint was written. Each variant applies one workaround or
dead end of the knowledge-base entry
(https://deadends.dev/pytorch/checkpoint-loading-error/pt2-linux). The model class lives in a
real module file written next to the checkpoint, as a project's model would.

    python repro.py --list
    python repro.py --variant baseline-module-prefix --device cpu --precision fp32
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-module-prefix": "checkpoint keys carry DataParallel's 'module.' prefix; strict load",
    "baseline-added-layer": "the model gained a layer since the checkpoint; strict load",
    "workaround1-strict-false-after-check": "added layer: missing/unexpected keys checked, then strict=False when only the new layer is missing",
    "workaround2-rename-keys": "'module.' prefix stripped from the keys, strict load",
    "deadend1-strict-false": "'module.' checkpoint loaded with strict=False, nothing else",
    "deadend2-pickle-model-literal": "torch.save(model) / torch.load(path) of the whole model",
    "deadend2-pickle-model-weights-only-false": "the same with torch.load(path, weights_only=False) where that argument exists",
    "control-same-model": "the same architecture, keys unchanged, strict load",
}
NOT_WRITTEN = []

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


def model_module(folder: str):
    path = os.path.join(folder, "kb_checkpoint_model.py")
    with open(path, "w") as f:
        f.write(MODEL_SOURCE)
    sys.path.insert(0, folder)
    sys.modules.pop("kb_checkpoint_model", None)
    return importlib.import_module("kb_checkpoint_model")


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("checkpoint keys do not depend on precision: run fp32 only")
    folder = tempfile.mkdtemp(prefix="kb-ckpt-")
    try:
        return _run(variant, device, folder)
    finally:
        sys.path.remove(folder)
        sys.modules.pop("kb_checkpoint_model", None)
        shutil.rmtree(folder, ignore_errors=True)


def _run(variant: str, device: str, folder: str) -> dict:
    mod = model_module(folder)
    torch.manual_seed(0)
    saved = mod.Net().to(device)
    path = os.path.join(folder, "ckpt.pt")
    state = saved.state_dict()
    if variant in ("baseline-module-prefix", "workaround2-rename-keys", "deadend1-strict-false"):
        state = {
            "module." + k: v for k, v in state.items()
        }  # what nn.DataParallel's state_dict() writes
    torch.manual_seed(1)  # the fresh model starts from other weights
    extra = variant in ("baseline-added-layer", "workaround1-strict-false-after-check")
    model = mod.Net(extra=extra).to(device)
    note = ""
    if variant.startswith("deadend2"):
        torch.save(saved, path)
        if variant == "deadend2-pickle-model-literal":
            model = torch.load(path)
        else:
            try:
                model = torch.load(path, weights_only=False)
            except TypeError as exc:  # torch.load has no weights_only argument here
                if "weights_only" not in str(exc):
                    raise
                model = torch.load(path)
                note = "torch.load has no weights_only argument in this release; loaded without it"
    else:
        torch.save(state, path)
        loaded = torch.load(path)
        if variant == "workaround2-rename-keys":
            loaded = {
                k[len("module.") :] if k.startswith("module.") else k: v for k, v in loaded.items()
            }
        if variant == "workaround1-strict-false-after-check":
            want = set(model.state_dict())
            missing = sorted(want - set(loaded))
            unexpected = sorted(set(loaded) - want)
            if unexpected or any(not k.startswith("extra.") for k in missing):
                raise RuntimeError(
                    "checkpoint mismatch beyond the new layer: missing %s, unexpected %s"
                    % (missing, unexpected)
                )
            note = "only the new layer's keys are missing: %s" % missing
            model.load_state_dict(loaded, strict=False)
        elif variant == "deadend1-strict-false":
            result = model.load_state_dict(loaded, strict=False)
            note = "strict=False reported %d missing and %d unexpected keys" % (
                len(result.missing_keys),
                len(result.unexpected_keys),
            )
        else:
            model.load_state_dict(loaded)
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


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
