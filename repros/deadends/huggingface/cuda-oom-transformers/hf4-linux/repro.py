"""Reproducer: "OutOfMemoryError: CUDA out of memory (Transformers)" (deadends/huggingface/cuda-oom-transformers/hf4-linux).

TODO: what this reproducer does, in a few lines.
"""

from __future__ import annotations

from reprokit import Unsupported, autocast, autocast_dtype, finite, moved  # noqa: F401

# One function per variant, (device, precision) -> its postconditions, each able to fail.
# Raise Unsupported (before the behaviour under test) where this cell cannot express the
# variant's intent; entry.yaml says what each variant is and where it runs. For example:
#
# def baseline(device, precision):
#     dtype = autocast_dtype(device, precision)  # Unsupported where autocast cannot run it
#     torch.manual_seed(0)
#     ...
#     return {"loss_finite": finite(losses), "params_moved": moved(before, params)}


# name -> its function; None while it is not written (the harness never runs it). Replace a
# None by the function once it is written.
VARIANTS = {
    "baseline": None,
    "workaround1": None,
    "workaround2": None,
    "deadend1": None,
    "deadend2": None,
    "control": None,
}
