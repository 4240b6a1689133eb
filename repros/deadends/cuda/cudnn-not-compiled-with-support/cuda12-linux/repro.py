"""Reproducer: "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"
(deadends/cuda/cudnn-not-compiled-with-support/cuda12-linux).

The record says cuDNN refuses some tensor configurations: a non-contiguous input, a tensor
format or a data type its kernels do not take. Each baseline runs one such configuration
through a cuDNN convolution (conv2d, forward and backward; fp16/bf16 under autocast): a
strided, non-contiguous view of the input; a channels_last input against an NCHW weight; a
batch past 65535 (a limit of cuDNN's grid, long a cause of this status). Where nothing is
raised, the postconditions say whether the output equals the same convolution computed with
cuDNN off on a contiguous float32 copy, and whether the gradients are finite. Each variant
applies one workaround of https://deadends.dev/cuda/cudnn-not-compiled-with-support/cuda12-linux.
No CPU twin: the CPU never runs cuDNN (conv() itself runs there; the tests use that).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, autocast, autocast_dtype, finite
from torch.nn import functional as F

CHANNELS, OUT, SIZE = 16, 32, 24
BIG_BATCH = 65536 + 8  # past the 65535 of a CUDA grid's second dimension
TOLERANCE = {"fp32": 1e-2, "fp16": 5e-2, "bf16": 1e-1}  # relative; cuDNN may use TF32


def need_cudnn(device):
    """Unsupported unless ``device`` is CUDA with cuDNN (decided before anything runs)."""
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: the error is a cuDNN convolution's")
    if not torch.backends.cudnn.is_available():
        raise Unsupported("this torch has no cuDNN (torch.backends.cudnn.is_available() False)")


def make_input(device, layout, batch=8, size=SIZE):
    """The convolution's input in ``layout``: "contiguous", "strided" (every other column of
    a wider tensor: not contiguous) or "channels_last"."""
    torch.manual_seed(0)
    if layout == "strided":
        return torch.randn(batch, CHANNELS, size, 2 * size, device=device)[..., ::2]
    x = torch.randn(batch, CHANNELS, size, size, device=device)
    if layout == "channels_last":
        return x.contiguous(memory_format=torch.channels_last)
    return x


def conv(device, precision, x, benchmark=None, make_contiguous=False) -> dict:
    """conv2d of ``x`` (3x3, padding 1) forward and backward on cuDNN, under autocast for
    fp16/bf16 and the cuDNN benchmark flag where given: the output against the same
    convolution with cuDNN off on a contiguous float32 copy, and the gradients."""
    dtype = autocast_dtype(device, precision)
    torch.manual_seed(1)
    w = torch.randn(OUT, CHANNELS, 3, 3, device=device) * 0.1
    with torch.backends.cudnn.flags(enabled=False):
        expected = F.conv2d(x.float().contiguous(), w, padding=1)
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    used = x.contiguous() if make_contiguous else x
    flags = {"enabled": True}
    if benchmark is not None:
        flags["benchmark"] = benchmark
    with torch.backends.cudnn.flags(**flags):
        with autocast(device, dtype):
            y = F.conv2d(used, w, padding=1)
        y.float().square().mean().backward()
    error = ((y.float() - expected).norm() / expected.norm()).item()
    limit = TOLERANCE[precision]
    return {
        "output_matches_reference": {
            "ok": error < limit,
            "detail": "relative error %.3g against cuDNN off in float32 (limit %g); input"
            " contiguous %s, output %s" % (error, limit, used.is_contiguous(), y.dtype),
        },
        "grads_finite": finite(
            [x.grad.norm().item(), w.grad.norm().item()], "input and weight gradient norms"
        ),
    }


def baseline_noncontiguous_input(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "strided"))


def baseline_channels_last_input(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "channels_last"))


def baseline_large_batch(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "contiguous", batch=BIG_BATCH, size=8))


def workaround1_benchmark(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "strided"), benchmark=True)


def workaround2_contiguous(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "strided"), make_contiguous=True)


def control_contiguous_input(device, precision):
    need_cudnn(device)
    return conv(device, precision, make_input(device, "contiguous"))


VARIANTS = {
    "baseline-noncontiguous-input": baseline_noncontiguous_input,
    "baseline-channels-last-input": baseline_channels_last_input,
    "baseline-large-batch": baseline_large_batch,
    "workaround1-benchmark": workaround1_benchmark,
    "workaround2-contiguous": workaround2_contiguous,
    "control-contiguous-input": control_contiguous_input,
}
