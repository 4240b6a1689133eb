"""Reproducer: "Error(s) in loading state_dict: Missing key(s) ... Unexpected key(s) ..."
(deadends.dev pytorch/state-dict-key-mismatch/torch2-linux).

A model wrapped in nn.DataParallel is saved (its keys carry the "module." prefix) and
loaded into the plain model; the layer is named ``layer4`` as in the documented message.
Every variant that loads must leave the fresh model with the saved weights (same outputs).
nn.DataParallel wraps on CPU too (it runs the module directly without GPUs).

    python repro.py --list
    python repro.py --variant baseline-dataparallel-prefix --device cpu --precision fp32
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-dataparallel-prefix": "save DataParallel(model).state_dict(), load into the plain model",
    "workaround1-strip-prefix": "the document's key.replace('module.', '') on every key, then load",
    "workaround2-save-unwrapped": "save wrapped.module.state_dict() (the unwrapped model), then load",
    "workaround3-compare-keys-literal": "compare the key sets (missing / unexpected), then load the checkpoint as it is",
    "workaround3-compare-keys-then-map": "compare the key sets, map each missing key to the unexpected key it is a suffix of, then load",
    "deadend1-strict-false": "load_state_dict(checkpoint, strict=False)",
    "deadend2-rename-every-key": "a hand-written rename of each key of this checkpoint, then load",
    "control-plain-save-load": "save and load the plain model (no wrapper)",
}
NOT_WRITTEN: list[str] = []


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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    torch.manual_seed(0)
    trained = Net().to(device)
    x = torch.randn(5, 6, device=device)
    want = trained(x).detach()
    if variant == "control-plain-save-load":
        checkpoint = roundtrip(trained.state_dict())
    else:
        wrapped = nn.DataParallel(trained)
        source = wrapped.module if variant == "workaround2-save-unwrapped" else wrapped
        checkpoint = roundtrip(source.state_dict())

    torch.manual_seed(1)  # a fresh model with other weights
    fresh = Net().to(device)
    notes = ["checkpoint keys %s" % sorted(checkpoint)]
    strict = True
    if variant == "workaround1-strip-prefix":
        checkpoint = {k.replace("module.", ""): v for k, v in checkpoint.items()}
    elif variant.startswith("workaround3-compare-keys"):
        model_keys = set(fresh.state_dict().keys())
        ckpt_keys = set(checkpoint.keys())
        missing, unexpected = model_keys - ckpt_keys, ckpt_keys - model_keys
        print("Missing:", sorted(missing))
        print("Unexpected:", sorted(unexpected))
        notes.append("missing %s, unexpected %s" % (sorted(missing), sorted(unexpected)))
        if variant == "workaround3-compare-keys-then-map":
            mapping = {}
            for key in missing:
                found = [u for u in unexpected if u.endswith("." + key)]
                if len(found) == 1:
                    mapping[found[0]] = key
            notes.append("mapping %s" % mapping)
            checkpoint = {mapping.get(k, k): v for k, v in checkpoint.items()}
    elif variant == "deadend1-strict-false":
        strict = False
    elif variant == "deadend2-rename-every-key":
        checkpoint = {
            "layer1.weight": checkpoint["module.layer1.weight"],
            "layer1.bias": checkpoint["module.layer1.bias"],
            "layer4.weight": checkpoint["module.layer4.weight"],
            "layer4.bias": checkpoint["module.layer4.bias"],
        }

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


if __name__ == "__main__":
    sys.exit(
        main(
            run,
            VARIANTS,
            __doc__,
            sys.argv[1:],
            not_written=NOT_WRITTEN,
            fixed_precision={v: "fp32" for v in VARIANTS},
        )
    )
