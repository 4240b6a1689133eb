"""Reproducer: "RuntimeError: cannot pin memory: CUDA not available"
(deadends.dev pytorch/pin-memory-error/pt2-linux).

The entry's condition is a machine without CUDA: this reproducer runs only where
torch.cuda.is_available() is False (elsewhere: unsupported, the condition cannot hold).
It pins a tensor and loads a small dataset with DataLoader(pin_memory=True); each
variant checks that the batches carry the dataset's values, and whether they are pinned
where pinning was asked for.

    python repro.py --list
    python repro.py --variant baseline-tensor-pin-memory --device cpu --precision fp32
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-tensor-pin-memory": "Tensor.pin_memory() on a machine without CUDA",
    "baseline-dataloader-pin-memory": "DataLoader(dataset, pin_memory=True) iterated on a machine without CUDA",
    "workaround1-pin-if-cuda-available": "DataLoader(dataset, pin_memory=torch.cuda.is_available())",
    "workaround2-pin-memory-false": "DataLoader(dataset, pin_memory=False)",
    "deadend1-ignore-error": "try: x.pin_memory() except RuntimeError: go on with the unpinned tensor",
    "deadend2-force-cuda-init": "torch.cuda.init() before pinning",
    "control-no-pinning": "DataLoader(dataset) with its defaults",
}
NOT_WRITTEN: list[str] = []


def load(pin) -> tuple:
    data = torch.arange(24, dtype=torch.float32).reshape(12, 2)
    kwargs = {} if pin is None else {"pin_memory": pin}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [b[0] for b in DataLoader(TensorDataset(data), batch_size=4, **kwargs)]
    pin_warnings = [str(w.message)[:160] for w in caught if "pin" in str(w.message).lower()]
    return data, batches, pin_warnings


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if torch.cuda.is_available():
        raise Unsupported(
            "the entry's condition is a machine without CUDA; here torch.cuda.is_available() is True"
        )
    if variant in (
        "baseline-tensor-pin-memory",
        "deadend1-ignore-error",
        "deadend2-force-cuda-init",
    ):
        x = torch.arange(6, dtype=torch.float32)
        if variant == "deadend2-force-cuda-init":
            torch.cuda.init()
        try:
            pinned = x.pin_memory()
        except RuntimeError as exc:
            if variant != "deadend1-ignore-error":
                raise
            print("ignored RuntimeError:", exc)
            pinned = x
        return {
            "values_intact": {
                "ok": bool(torch.equal(pinned, x)),
                "detail": "the tensor in use: %s" % pinned.tolist(),
            },
            **(
                {}
                if variant == "deadend1-ignore-error"
                else {
                    "pinned": {
                        "ok": pinned.is_pinned(),
                        "detail": "is_pinned() %s" % pinned.is_pinned(),
                    }
                }
            ),
        }
    pin = {
        "baseline-dataloader-pin-memory": True,
        "workaround1-pin-if-cuda-available": torch.cuda.is_available(),
        "workaround2-pin-memory-false": False,
        "control-no-pinning": None,
    }[variant]
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
