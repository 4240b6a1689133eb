"""Reproducer: "Attempting to deserialize object on a CUDA device but torch.cuda.is_available()
is False" (deadends/cuda/checkpoint-device-mismatch/cuda12-linux).

A state_dict checkpoint written on a GPU machine, loaded on a machine without CUDA. The
checkpoint is written here as a GPU machine writes it: torch.save records the device of each
storage as a location tag ("cuda:0" for a tensor on the first GPU), and a tagger registered
with torch.serialization.register_package for the save only gives this CPU model's storages
that tag. Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/cuda/checkpoint-device-mismatch/cuda12-linux); the version advice
(dead end 3, downgrade PyTorch) and the CUDA runtime of dead end 1 are installed by the
harness (entry.yaml `requires`), so their branches load the checkpoint as the baseline does.

    python repro.py --list
    python repro.py --variant baseline-gpu-checkpoint --device cpu --precision fp32
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
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
    "baseline-gpu-checkpoint": "a state_dict saved on a GPU (storages tagged cuda:0), torch.load(path) without CUDA",
    "workaround1-map-location-device": "torch.load(path, map_location=torch.device('cpu'))",
    "workaround2-map-location-cpu-then-move": "map_location='cpu', load_state_dict, then the model moved to cuda if available, else cpu",
    "workaround3-state-dict-literal": "the checkpoint is a state_dict, as the workaround says to save, loaded with torch.load(path) alone",
    "workaround3-state-dict-as-shown": "the state_dict loaded with map_location='cpu', as the workaround's example does",
    "deadend1-cuda-runtime-installed": "the CUDA runtime (pip's nvidia-cuda-runtime-cu12) installed on the machine without a GPU, then torch.load(path)",
    "deadend2-edit-bytes": "the checkpoint's bytes edited by hand (b'cuda:0' replaced by b'cpu'), then torch.load(path)",
    "deadend3-downgrade-torch-literal": "torch downgraded below 2.0 (torch<2), then torch.load(path)",
    "deadend3-downgrade-torch-sensible": "torch downgraded to the first 2.x line (torch<2.1), then torch.load(path)",
    "control-cpu-checkpoint": "a checkpoint saved on this CPU machine, torch.load(path)",
}
NOT_WRITTEN = []

_TAG_PRIORITY = -1  # before every tagger torch registers (cpu is 10, cuda 20)


def _as_gpu(storage):
    return "cuda:0"


def _not_mine(storage, location):
    return None  # leave every load to torch's own deserializers


def save_as_gpu_machine(state, path):
    """torch.save(state, path) with every storage tagged "cuda:0", as on a GPU machine."""
    entry = (_TAG_PRIORITY, _as_gpu, _not_mine)
    torch.serialization.register_package(*entry)
    try:
        torch.save(state, path)
    finally:
        torch.serialization._package_registry.remove(entry)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("a checkpoint's device tags do not depend on precision: fp32 only")
    if torch.cuda.is_available():
        raise Unsupported("this machine has CUDA; the error is about loading without it")
    folder = tempfile.mkdtemp(prefix="kb-gpu-ckpt-")
    try:
        return _run(variant, os.path.join(folder, "model.pt"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(variant: str, path: str) -> dict:
    torch.manual_seed(0)
    saved = Net()
    state = saved.state_dict()
    if variant == "control-cpu-checkpoint":
        torch.save(state, path)
    else:
        save_as_gpu_machine(state, path)
    if variant == "deadend2-edit-bytes":
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data.replace(b"cuda:0", b"cpu"))
    note = ""
    if variant == "workaround1-map-location-device":
        loaded = torch.load(path, map_location=torch.device("cpu"))
    elif variant in ("workaround2-map-location-cpu-then-move", "workaround3-state-dict-as-shown"):
        loaded = torch.load(path, map_location="cpu")
    else:
        loaded = torch.load(path)
    torch.manual_seed(1)  # the fresh model starts from other weights
    model = Net()
    model.load_state_dict(loaded)
    if variant == "workaround2-map-location-cpu-then-move":
        target = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = model.to(target)
        note = "moved to %s" % target
    got = model.state_dict()
    same = [k for k in state if k in got and torch.equal(got[k].cpu(), state[k])]
    devices = sorted({str(t.device) for t in got.values()})
    return {
        "saved_weights_restored": {
            "ok": len(same) == len(state),
            "detail": "%d of %d saved tensors restored (%s) %s"
            % (len(same), len(state), ", ".join(sorted(state)), note),
        },
        "weights_on_this_machine": {
            "ok": devices == ["cpu"],
            "detail": "the loaded weights are on %s" % ", ".join(devices),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
