"""Reproducer: "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED on RNN backward"
(deadends/cuda/cudnn-rnn-backward-error/cuda12-a100).

The record names the cause: non-contiguous input or hidden state given to a cuDNN LSTM (or
too little workspace for its batch). The baselines run a 2-layer LSTM on CUDA with cuDNN,
forward and backward, on an input (one baseline) or an initial state (the other) that is a
transposed view (not contiguous), and measure whether that cause raises the documented error; where nothing is
raised, the postconditions say whether backward produced finite gradients for every
weight. Each variant applies one workaround or dead end of
https://deadends.dev/cuda/cudnn-rnn-backward-error/cuda12-a100. No CPU twin: on the CPU torch
runs its own RNN kernels, never cuDNN (run() itself works there; the tests use that).
"""

from __future__ import annotations

import time

import torch
from reprokit import Unsupported, finite
from torch import nn
from torch.nn import functional as F

BATCH, STEPS, FEATURES, HIDDEN, LAYERS = 64, 50, 32, 64, 2
SLOWDOWN = 5.0  # the record's own figure for cuDNN disabled: "5-10x slowdown"


def need_cudnn(device):
    """Unsupported unless ``device`` is CUDA with cuDNN (decided before anything runs)."""
    if device != "cuda" or not torch.cuda.is_available():
        raise Unsupported("needs a CUDA device: the error is cuDNN's RNN backward")
    if not torch.backends.cudnn.is_available():
        raise Unsupported("this torch has no cuDNN (torch.backends.cudnn.is_available() False)")


def inputs(device, batch, input_contiguous, state_contiguous):
    """(x, h0, c0) in the LSTM's (steps, batch, ...) layout: transposed views of tensors made
    batch first (not contiguous), each made contiguous where asked, as the workaround says."""
    torch.manual_seed(0)
    x = torch.randn(batch, STEPS, FEATURES, device=device).transpose(0, 1)
    h0 = torch.randn(batch, LAYERS, HIDDEN, device=device).transpose(0, 1)
    c0 = torch.randn(batch, LAYERS, HIDDEN, device=device).transpose(0, 1)
    if input_contiguous:
        x = x.contiguous()
    if state_contiguous:
        h0, c0 = h0.contiguous(), c0.contiguous()
    return x, h0, c0


def run(
    device, precision, batch=BATCH, x_contig=False, h_contig=False, enabled=True, benchmark=None
) -> dict:
    """The LSTM forward and backward under cuDNN flags ``enabled``/``benchmark`` (None: as
    they are): whether backward gave every weight a finite gradient, and the layout used."""
    if precision != "fp32":
        raise Unsupported("the record names layout and workspace, not precision: fp32 only")
    x, h0, c0 = inputs(device, batch, x_contig, h_contig)
    torch.manual_seed(1)
    lstm = nn.LSTM(FEATURES, HIDDEN, num_layers=LAYERS).to(device)
    flags = {"enabled": enabled}
    if benchmark is not None:
        flags["benchmark"] = benchmark
    with torch.backends.cudnn.flags(**flags):
        out, _ = lstm(x, (h0, c0))
        out.float().pow(2).mean().backward()
    grads = {n: p.grad for n, p in lstm.named_parameters()}
    missing = sorted(n for n, g in grads.items() if g is None)
    norms = [g.norm().item() for g in grads.values() if g is not None]
    layout = "x contiguous %s, h0 contiguous %s" % (x.is_contiguous(), h0.is_contiguous())
    return {
        "every_weight_has_grad": {
            "ok": not missing and bool(grads),
            "detail": "no gradient: %s; %d weights; %s" % (missing, len(grads), layout),
        },
        "grads_finite": finite(norms, "gradient norms"),
    }


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def seconds(fn, device, repeat=5) -> float:
    """The median wall time of ``fn()`` after one warm-up call, the device synchronised."""
    fn()
    sync(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def conv_step(device):
    torch.manual_seed(0)
    x = torch.randn(32, 64, 56, 56, device=device, requires_grad=True)
    w = torch.randn(64, 64, 3, 3, device=device, requires_grad=True)

    def step():
        F.conv2d(x, w, padding=1).sum().backward()

    return step


def baseline_noncontiguous_input(device, precision):
    need_cudnn(device)
    return run(device, precision, h_contig=True)


def baseline_noncontiguous_state(device, precision):
    need_cudnn(device)
    return run(device, precision, x_contig=True)


def workaround1_contiguous(device, precision):
    need_cudnn(device)
    return run(device, precision, x_contig=True, h_contig=True)


def workaround2_smaller_batch(device, precision):
    need_cudnn(device)
    return run(device, precision, batch=BATCH // 4)


def workaround3_benchmark_off(device, precision):
    need_cudnn(device)
    return run(device, precision, enabled=True, benchmark=False)


def deadend1_disable_cudnn(device, precision):
    need_cudnn(device)
    checks = run(device, precision, enabled=False)
    # the record's failure: convolutions, unrelated to the RNN, 5-10x slower without cuDNN
    step = conv_step(device)
    with torch.backends.cudnn.flags(enabled=True):
        fast = seconds(step, device)
    with torch.backends.cudnn.flags(enabled=False):
        slow = seconds(step, device)
    checks.update(slowdown_check(fast, slow))
    return checks


def slowdown_check(fast, slow) -> dict:
    """Postcondition: the time without cuDNN is under the record's figure times that with."""
    return {
        "conv_within_record_slowdown": {
            "ok": slow < SLOWDOWN * fast,
            "detail": "conv2d forward+backward: %.4f s with cuDNN, %.4f s without (%.1fx; the"
            " record: %gx or more)" % (fast, slow, slow / fast, SLOWDOWN),
        }
    }


def control_contiguous_batch_first(device, precision):
    need_cudnn(device)
    if precision != "fp32":
        raise Unsupported("the record names layout and workspace, not precision: fp32 only")
    # the layout cuDNN wants from the start: a batch_first LSTM on the tensors as made
    torch.manual_seed(0)
    x = torch.randn(BATCH, STEPS, FEATURES, device=device)
    h0 = torch.randn(LAYERS, BATCH, HIDDEN, device=device)
    c0 = torch.randn(LAYERS, BATCH, HIDDEN, device=device)
    torch.manual_seed(1)
    lstm = nn.LSTM(FEATURES, HIDDEN, num_layers=LAYERS, batch_first=True).to(device)
    out, _ = lstm(x, (h0, c0))
    out.pow(2).mean().backward()
    norms = [p.grad.norm().item() for p in lstm.parameters() if p.grad is not None]
    return {
        "every_weight_has_grad": {
            "ok": len(norms) == len(list(lstm.parameters())) and bool(norms),
            "detail": "%d of %d weights have a gradient"
            % (len(norms), len(list(lstm.parameters()))),
        },
        "grads_finite": finite(norms, "gradient norms"),
    }


VARIANTS = {
    "baseline-noncontiguous-input": baseline_noncontiguous_input,
    "baseline-noncontiguous-state": baseline_noncontiguous_state,
    "workaround1-contiguous": workaround1_contiguous,
    "workaround2-smaller-batch": workaround2_smaller_batch,
    "workaround3-benchmark-off": workaround3_benchmark_off,
    "deadend1-disable-cudnn": deadend1_disable_cudnn,
    "control-contiguous-batch-first": control_contiguous_batch_first,
}
