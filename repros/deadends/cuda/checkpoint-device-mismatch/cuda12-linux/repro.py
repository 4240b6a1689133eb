"""Reproducer: "Attempting to deserialize object on a CUDA device but torch.cuda.is_available()
is False" (deadends/cuda/checkpoint-device-mismatch/cuda12-linux).

A state_dict checkpoint written on a GPU machine, loaded on a machine without CUDA. The
checkpoint is written here as a GPU machine writes it: torch.save records the device of each
storage as a location tag ("cuda:0" for a tensor on the first GPU), and a tagger registered
with torch.serialization.register_package for the save only gives this CPU model's storages
that tag. Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/cuda/checkpoint-device-mismatch/cuda12-linux); the version advice
(dead end 3, downgrade PyTorch) and the CUDA runtime of dead end 1 are installed by the
harness (entry.yaml `requires`), so their functions load the checkpoint as the baseline does.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from reprokit import Unsupported
from torch import nn

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


def checkpoint(precision, load, save=save_as_gpu_machine, edit=None, move=False) -> dict:
    """A state_dict saved (by ``save``, its file then ``edit``-ed), ``load(path)`` into a
    fresh model (then moved to cuda where available, if ``move``): whether the saved weights
    came back, on this machine."""
    if precision != "fp32":
        raise Unsupported("a checkpoint's device tags do not depend on precision: fp32 only")
    if torch.cuda.is_available():
        raise Unsupported("this machine has CUDA; the error is about loading without it")
    folder = tempfile.mkdtemp(prefix="kb-gpu-ckpt-")
    try:
        path = os.path.join(folder, "model.pt")
        torch.manual_seed(0)
        state = Net().state_dict()
        save(state, path)
        if edit is not None:
            edit(path)
        torch.manual_seed(1)  # the fresh model starts from other weights
        model = Net()
        model.load_state_dict(load(path))
        note = ""
        if move:
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
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def baseline_gpu_checkpoint(device, precision):
    return checkpoint(precision, torch.load)


def workaround1_map_location_device(device, precision):
    return checkpoint(precision, lambda path: torch.load(path, map_location=torch.device("cpu")))


def workaround2_map_location_cpu_then_move(device, precision):
    return checkpoint(precision, lambda path: torch.load(path, map_location="cpu"), move=True)


def workaround3_state_dict_literal(device, precision):
    # the checkpoint already is a state_dict, the form the workaround says to save
    return checkpoint(precision, torch.load)


def workaround3_state_dict_as_shown(device, precision):
    return checkpoint(precision, lambda path: torch.load(path, map_location="cpu"))


def deadend1_cuda_runtime_installed(device, precision):
    # the CUDA runtime is installed by the harness (entry.yaml requires)
    return checkpoint(precision, torch.load)


def deadend2_edit_bytes(device, precision):
    def replace_tag(path):
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data.replace(b"cuda:0", b"cpu"))

    return checkpoint(precision, torch.load, edit=replace_tag)


def deadend3_downgrade_torch_literal(device, precision):
    # torch<2 is installed by the harness (entry.yaml requires)
    return checkpoint(precision, torch.load)


def deadend3_downgrade_torch_sensible(device, precision):
    # torch<2.1 is installed by the harness (entry.yaml requires)
    return checkpoint(precision, torch.load)


def control_cpu_checkpoint(device, precision):
    return checkpoint(precision, torch.load, save=torch.save)


VARIANTS = {
    "baseline-gpu-checkpoint": baseline_gpu_checkpoint,
    "workaround1-map-location-device": workaround1_map_location_device,
    "workaround2-map-location-cpu-then-move": workaround2_map_location_cpu_then_move,
    "workaround3-state-dict-literal": workaround3_state_dict_literal,
    "workaround3-state-dict-as-shown": workaround3_state_dict_as_shown,
    "deadend1-cuda-runtime-installed": deadend1_cuda_runtime_installed,
    "deadend2-edit-bytes": deadend2_edit_bytes,
    "deadend3-downgrade-torch-literal": deadend3_downgrade_torch_literal,
    "deadend3-downgrade-torch-sensible": deadend3_downgrade_torch_sensible,
    "control-cpu-checkpoint": control_cpu_checkpoint,
}
