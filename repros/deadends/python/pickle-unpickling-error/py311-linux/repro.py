"""Reproducer: "_pickle.UnpicklingError: invalid load key, '\\x00'"
(deadends/python/pickle-unpickling-error/py311-linux).

A file that is not a pickle handed to a pickle reader: a model's weights written in the
safetensors format (an 8-byte little-endian header length, a JSON header, the raw bytes;
written here by hand, so the baselines need no package) and read with pickle.load or
torch.load. Its header is padded to 256 bytes, so the file's first byte is 0x00, the key the
record quotes. Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/python/pickle-unpickling-error/py311-linux); the variants that use the
safetensors library get it from the harness (entry.yaml `requires`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pickle
import pickletools
import py_compile
import shutil
import struct
import tempfile

import torch
from reprokit import Unsupported

HEADER_BYTES = 256  # a header length whose low byte is 0: the file starts with b"\x00"


def weights():
    """A small state_dict: name -> float32 tensor."""
    torch.manual_seed(0)
    return {
        "body.weight": torch.randn(4, 6),
        "body.bias": torch.randn(4),
        "head.weight": torch.randn(2, 4),
    }


def write_safetensors(state, path):
    """state written in the safetensors layout, by hand (float32, C order)."""
    meta, offset, chunks = {}, 0, []
    for name in sorted(state):
        values = state[name].contiguous().view(-1).tolist()
        data = struct.pack("<%df" % len(values), *values)
        meta[name] = {
            "dtype": "F32",
            "shape": list(state[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        chunks.append(data)
    header = json.dumps(meta, separators=(",", ":")).encode()
    if len(header) > HEADER_BYTES:
        raise AssertionError("the header outgrew its padding: %d bytes" % len(header))
    header += b" " * (HEADER_BYTES - len(header))  # spaces pad a header, as the format allows
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + b"".join(chunks))


def restored(state, got) -> dict:
    """Whether ``got`` holds every tensor of ``state``, equal."""
    got = got if isinstance(got, dict) else {}
    same = [
        k for k in state if k in got and torch.is_tensor(got[k]) and torch.equal(got[k], state[k])
    ]
    return {
        "tensors_restored": {
            "ok": len(same) == len(state) and len(got) == len(state),
            "detail": "%d of %d saved tensors came back equal (%d loaded)"
            % (len(same), len(state), len(got)),
        }
    }


def loaded(
    read, write=write_safetensors, name="model.safetensors", prepare=None, precision="fp32"
) -> dict:
    """``state`` written by ``write`` to the file ``name``, ``prepare(folder, path)`` (returns
    the path to read), then ``read(path)``: whether the tensors came back."""
    if precision != "fp32":
        raise Unsupported("a file's format does not depend on precision: fp32 only")
    folder = tempfile.mkdtemp(prefix="kb-unpickling-")
    try:
        path = os.path.join(folder, name)
        state = weights()
        write(state, path)
        if prepare is not None:
            path = prepare(folder, path)
        return restored(state, read(path))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pickle_load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def require_weights_only():
    if "weights_only" not in inspect.signature(torch.load).parameters:
        raise Unsupported("this torch.load has no weights_only argument")


def safetensors_load(path):
    try:
        from safetensors.torch import load_file
    except ImportError as exc:  # the harness installs it (entry.yaml requires)
        raise Unsupported("safetensors is not installed: %s" % exc)
    return load_file(path)


def sniffed_load(path):
    """The loader chosen from the file's first bytes, as workaround 1 says."""
    with open(path, "rb") as f:
        head = f.read(16)
    (size,) = struct.unpack("<Q", head[:8])
    if head[8:9] == b"{" and size < os.path.getsize(path):
        return safetensors_load(path)
    if head[:2] == b"PK":  # a zip archive: torch.save's format
        return torch.load(path)
    return pickle_load(path)


def baseline_pickle_load(device, precision):
    return loaded(pickle_load, precision=precision)


def baseline_torch_load(device, precision):
    return loaded(torch.load, precision=precision)


def baseline_torch_load_bin_name(device, precision):
    # the safetensors bytes under the name of a pickled checkpoint
    return loaded(torch.load, name="pytorch_model.bin", precision=precision)


def baseline_torch_load_weights_only_false(device, precision):
    require_weights_only()
    return loaded(
        lambda path: torch.load(path, weights_only=False),
        name="pytorch_model.bin",
        precision=precision,
    )


def workaround1_sniff_header(device, precision):
    return loaded(sniffed_load, precision=precision)


def workaround1_weights_only_true(device, precision):
    require_weights_only()
    return loaded(
        lambda path: torch.load(path, weights_only=True),
        name="pytorch_model.bin",
        precision=precision,
    )


def workaround2_safetensors_library(device, precision):
    def write(state, path):
        try:
            from safetensors.torch import save_file
        except ImportError as exc:
            raise Unsupported("safetensors is not installed: %s" % exc)
        try:
            import numpy  # noqa: F401
        except ImportError as exc:  # save_file converts through numpy; torch does not bring it
            raise Unsupported(
                "safetensors' save_file needs numpy, which this environment lacks: %s" % exc
            )
        save_file(state, path)

    return loaded(safetensors_load, write=write, precision=precision)


def workaround3_protocol_inspected(device, precision):
    def read(path):
        # the protocol read with pickletools, as the workaround says, then the file loaded
        with open(path, "rb") as f, open(os.devnull, "w") as out:
            pickletools.dis(f, out=out)
        return pickle_load(path)

    return loaded(read, precision=precision)


def deadend1_newer_python(device, precision):
    # the matrix's Python axis is the upgrade: the same load in each interpreter
    return loaded(pickle_load, precision=precision)


def deadend2_clear_pycache(device, precision):
    def prepare(folder, path):
        # a module of the folder compiled to its bytecode cache (as an import leaves it), removed
        module = os.path.join(folder, "kb_weights_reader.py")
        with open(module, "w") as f:
            f.write("READER = 'pickle'\n")
        py_compile.compile(module, doraise=True)
        caches = [
            os.path.join(root, d)
            for root, dirs, _ in os.walk(folder)
            for d in dirs
            if d == "__pycache__"
        ]
        if not caches:
            raise Unsupported("py_compile wrote no __pycache__ folder")
        for cache in caches:
            shutil.rmtree(cache)
        importlib.invalidate_caches()
        return path

    return loaded(pickle_load, prepare=prepare, precision=precision)


def deadend3_fetch_again(device, precision):
    def prepare(folder, path):
        # the same file fetched again (a fresh copy of the same bytes), format unchecked
        again = os.path.join(folder, "downloaded-again.bin")
        shutil.copyfile(path, again)
        os.remove(path)
        return again

    return loaded(torch.load, name="pytorch_model.bin", prepare=prepare, precision=precision)


def control_torch_save(device, precision):
    return loaded(torch.load, write=torch.save, name="model.pt", precision=precision)


VARIANTS = {
    "baseline-pickle-load": baseline_pickle_load,
    "baseline-torch-load": baseline_torch_load,
    "baseline-torch-load-bin-name": baseline_torch_load_bin_name,
    "baseline-torch-load-weights-only-false": baseline_torch_load_weights_only_false,
    "workaround1-sniff-header": workaround1_sniff_header,
    "workaround1-weights-only-true": workaround1_weights_only_true,
    "workaround2-safetensors-library": workaround2_safetensors_library,
    "workaround3-protocol-inspected": workaround3_protocol_inspected,
    "deadend1-newer-python": deadend1_newer_python,
    "deadend2-clear-pycache": deadend2_clear_pycache,
    "deadend3-fetch-again": deadend3_fetch_again,
    "control-torch-save": control_torch_save,
}
