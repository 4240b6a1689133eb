"""Reproducer: "RuntimeError: cannot pin memory: CUDA not available"
(deadends.dev pytorch/pin-memory-error/pt2-linux).

The entry's condition is a machine without CUDA: this reproducer runs only where
torch.cuda.is_available() is False (elsewhere: unsupported, the condition cannot hold).
It pins a tensor and loads a small dataset with DataLoader(pin_memory=True); each
variant checks that the batches carry the dataset's values, and whether they are pinned
where pinning was asked for.
"""

from __future__ import annotations

import warnings

import torch
from reprokit import Unsupported
from torch.utils.data import DataLoader, TensorDataset


def load(pin) -> tuple:
    data = torch.arange(24, dtype=torch.float32).reshape(12, 2)
    kwargs = {} if pin is None else {"pin_memory": pin}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [b[0] for b in DataLoader(TensorDataset(data), batch_size=4, **kwargs)]
    pin_warnings = [str(w.message)[:160] for w in caught if "pin" in str(w.message).lower()]
    return data, batches, pin_warnings


def without_cuda() -> None:
    if torch.cuda.is_available():
        raise Unsupported(
            "the entry's condition is a machine without CUDA; here torch.cuda.is_available() is True"
        )


def pin_tensor(init_cuda=False, ignore_error=False) -> dict:
    """Tensor.pin_memory() (after torch.cuda.init() where ``init_cuda``; its RuntimeError
    ignored, the tensor used unpinned, where ``ignore_error``)."""
    without_cuda()
    x = torch.arange(6, dtype=torch.float32)
    if init_cuda:
        torch.cuda.init()
    try:
        pinned = x.pin_memory()
    except RuntimeError as exc:
        if not ignore_error:
            raise
        print("ignored RuntimeError:", exc)
        pinned = x
    checks = {
        "values_intact": {
            "ok": bool(torch.equal(pinned, x)),
            "detail": "the tensor in use: %s" % pinned.tolist(),
        }
    }
    # what pinning is for; an ignored error leaves the tensor unpinned, silently
    checks["pinned"] = {
        "ok": pinned.is_pinned(),
        "detail": "is_pinned() %s" % pinned.is_pinned(),
    }
    return checks


def load_pinned(pin) -> dict:
    """DataLoader(..., pin_memory=pin) (its default where None)."""
    without_cuda()
    data, batches, pin_warnings = load(pin)
    got = torch.cat(batches) if batches else torch.empty(0)
    checks = {
        "values_intact": {
            "ok": got.shape == data.shape and bool(torch.equal(got, data)),
            "detail": "%d batches, %d rows" % (len(batches), got.shape[0]),
        },
        "no_pin_warning": {
            "ok": not pin_warnings,
            "detail": "warnings about pinning: %s" % pin_warnings,
        },
    }
    if pin:
        pinned = [b.is_pinned() for b in batches]
        checks["pinned"] = {
            "ok": bool(pinned) and all(pinned),
            "detail": "is_pinned() per batch %s" % pinned,
        }
    return checks


def baseline_tensor_pin_memory(device, precision):
    return pin_tensor()


def baseline_dataloader_pin_memory(device, precision):
    return load_pinned(True)


def workaround1_pin_if_cuda_available(device, precision):
    return load_pinned(torch.cuda.is_available())


def workaround2_pin_memory_false(device, precision):
    return load_pinned(False)


def deadend1_ignore_error(device, precision):
    return pin_tensor(ignore_error=True)


def deadend2_force_cuda_init(device, precision):
    return pin_tensor(init_cuda=True)


def control_no_pinning(device, precision):
    return load_pinned(None)


VARIANTS = {
    "baseline-tensor-pin-memory": baseline_tensor_pin_memory,
    "baseline-dataloader-pin-memory": baseline_dataloader_pin_memory,
    "workaround1-pin-if-cuda-available": workaround1_pin_if_cuda_available,
    "workaround2-pin-memory-false": workaround2_pin_memory_false,
    "deadend1-ignore-error": deadend1_ignore_error,
    "deadend2-force-cuda-init": deadend2_force_cuda_init,
    "control-no-pinning": control_no_pinning,
}
