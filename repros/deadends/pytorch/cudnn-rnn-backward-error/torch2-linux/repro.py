"""Reproducer: "cuDNN error: CUDNN_STATUS_EXECUTION_FAILED when calling cudnnRNNBackwardData"
(deadends/pytorch/cudnn-rnn-backward-error/torch2-linux).

A cuDNN LSTM trained one step on the GPU in the two situations the knowledge-base entry
(https://deadends.dev/pytorch/cudnn-rnn-backward-error/torch2-linux) names as causes: an
initial hidden state that is not contiguous in memory (a transposed view), and a padded batch
of sequences of different lengths fed without packing. Each variant applies one workaround
or dead end. CUDA cells only (skipped elsewhere).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn

B, T, F, H, LAYERS = 4, 7, 6, 8, 2
LENGTHS = [7, 5, 3, 2]


def lstm_step(
    device, hidden="contiguous", packed=False, deterministic=False, cudnn_off=False
) -> dict:
    """One LSTM step: its (h0, c0) ``hidden`` "contiguous", "transposed" (non-contiguous
    views) or "made-contiguous" (.contiguous() of those), the padded batch ``packed``, with
    cudnn.deterministic or cudnn.enabled=False set for the step."""
    if not torch.backends.cudnn.is_available():
        raise Unsupported("cuDNN is not available in this build")
    torch.manual_seed(0)
    lstm = nn.LSTM(F, H, num_layers=LAYERS, batch_first=True).to(device)
    x = torch.randn(B, T, F, device=device)
    for i, n in enumerate(LENGTHS):
        x[i, n:] = 0  # padding
    if hidden == "contiguous":
        h0 = torch.randn(LAYERS, B, H, device=device)
        c0 = torch.randn(LAYERS, B, H, device=device)
    else:
        h0 = torch.randn(B, LAYERS, H, device=device).transpose(0, 1)
        c0 = torch.randn(B, LAYERS, H, device=device).transpose(0, 1)
        if hidden == "made-contiguous":
            h0, c0 = h0.contiguous(), c0.contiguous()
    h0.requires_grad_(True)
    flags = {
        "deterministic": torch.backends.cudnn.deterministic,
        "enabled": torch.backends.cudnn.enabled,
    }
    try:
        if deterministic:
            torch.backends.cudnn.deterministic = True
        if cudnn_off:
            torch.backends.cudnn.enabled = False
        inp = (
            nn.utils.rnn.pack_padded_sequence(
                x, torch.tensor(LENGTHS), batch_first=True, enforce_sorted=False
            )
            if packed
            else x
        )
        out, _ = lstm(inp, (h0, c0))
        if packed:
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)
        loss = out.pow(2).mean()
        loss.backward()
        torch.cuda.synchronize()
    finally:
        torch.backends.cudnn.deterministic = flags["deterministic"]
        torch.backends.cudnn.enabled = flags["enabled"]
    grads = [p.grad for p in lstm.parameters()]
    return {
        "gradients_finite": {
            "ok": all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
            and h0.grad is not None,
            "detail": "%d of %d LSTM parameters have finite gradients; h0.grad %s"
            % (
                sum(g is not None and bool(torch.isfinite(g).all()) for g in grads),
                len(grads),
                "present" if h0.grad is not None else "missing",
            ),
        },
    }


def baseline_noncontiguous_hidden(device, precision):
    return lstm_step(device, hidden="transposed")


def baseline_padded_unpacked(device, precision):
    return lstm_step(device)


def workaround1_contiguous_hidden(device, precision):
    return lstm_step(device, hidden="made-contiguous")


def workaround2_pack_padded(device, precision):
    # the first baseline (a transposed hidden state, the padded batch as it is) with the
    # padded batch packed: the workaround's action alone, the rest of its code unchanged
    return lstm_step(device, hidden="transposed", packed=True)


def workaround3_cudnn_deterministic(device, precision):
    return lstm_step(device, hidden="transposed", deterministic=True)


def deadend1_cudnn_disabled(device, precision):
    return lstm_step(device, hidden="transposed", cudnn_off=True)


def control_contiguous_packed(device, precision):
    return lstm_step(device, packed=True)


VARIANTS = {
    "baseline-noncontiguous-hidden": baseline_noncontiguous_hidden,
    "baseline-padded-unpacked": baseline_padded_unpacked,
    "workaround1-contiguous-hidden": workaround1_contiguous_hidden,
    "workaround2-pack-padded": workaround2_pack_padded,
    "workaround3-cudnn-deterministic": workaround3_cudnn_deterministic,
    "deadend1-cudnn-disabled": deadend1_cudnn_disabled,
    # an older torch: the matrix's torch axis measures every variant in every release
    "deadend2-older-torch": None,
    "control-contiguous-packed": control_contiguous_packed,
}
