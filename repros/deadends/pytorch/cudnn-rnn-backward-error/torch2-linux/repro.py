"""Reproducer: "cuDNN error: CUDNN_STATUS_EXECUTION_FAILED when calling cudnnRNNBackwardData"
(deadends/pytorch/cudnn-rnn-backward-error/torch2-linux).

A cuDNN LSTM trained one step on the GPU in the two situations the knowledge-base entry
(https://deadends.dev/pytorch/cudnn-rnn-backward-error/torch2-linux) names as causes: an
initial hidden state that is not contiguous in memory (a transposed view), and a padded batch
of sequences of different lengths fed without packing. Each variant applies one workaround
or dead end. CUDA cells only (skipped elsewhere).

    python repro.py --list
    python repro.py --variant baseline-noncontiguous-hidden --device cuda --precision fp32
"""

from __future__ import annotations

import sys
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
    "baseline-noncontiguous-hidden": "h0 and c0 passed as transposed (non-contiguous) views",
    "baseline-padded-unpacked": "a zero-padded batch of lengths 7, 5, 3 and 2 fed to the LSTM as it is",
    "workaround1-contiguous-hidden": "h0.contiguous() and c0.contiguous() before the call",
    "workaround2-pack-padded": "the padded batch packed with pack_padded_sequence (enforce_sorted=False)",
    "workaround3-cudnn-deterministic": "torch.backends.cudnn.deterministic = True, hidden state still non-contiguous",
    "deadend1-cudnn-disabled": "torch.backends.cudnn.enabled = False, hidden state still non-contiguous",
    "deadend2-older-torch": "an older torch: the matrix's torch axis measures every variant in every release",
    "control-contiguous-packed": "contiguous hidden state, packed batch",
}
NOT_WRITTEN = ["deadend2-older-torch"]

B, T, F, H, LAYERS = 4, 7, 6, 8, 2
LENGTHS = [7, 5, 3, 2]


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cuda":
        raise Unsupported("the cuDNN RNN kernels need a CUDA device; this cell is %s" % device)
    if precision != "fp32":
        raise Unsupported("measured in fp32 only")
    if not torch.backends.cudnn.is_available():
        raise Unsupported("cuDNN is not available in this build")
    torch.manual_seed(0)
    lstm = nn.LSTM(F, H, num_layers=LAYERS, batch_first=True).to(device)
    x = torch.randn(B, T, F, device=device)
    for i, n in enumerate(LENGTHS):
        x[i, n:] = 0  # padding
    noncontiguous = variant in (
        "baseline-noncontiguous-hidden",
        "workaround3-cudnn-deterministic",
        "deadend1-cudnn-disabled",
    )
    if noncontiguous or variant == "workaround1-contiguous-hidden":
        h0 = torch.randn(B, LAYERS, H, device=device).transpose(0, 1)
        c0 = torch.randn(B, LAYERS, H, device=device).transpose(0, 1)
        if variant == "workaround1-contiguous-hidden":
            h0, c0 = h0.contiguous(), c0.contiguous()
    else:
        h0 = torch.randn(LAYERS, B, H, device=device)
        c0 = torch.randn(LAYERS, B, H, device=device)
    h0.requires_grad_(True)
    flags = {
        "deterministic": torch.backends.cudnn.deterministic,
        "enabled": torch.backends.cudnn.enabled,
    }
    try:
        if variant == "workaround3-cudnn-deterministic":
            torch.backends.cudnn.deterministic = True
        if variant == "deadend1-cudnn-disabled":
            torch.backends.cudnn.enabled = False
        packed = variant in ("workaround2-pack-padded", "control-contiguous-packed")
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


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
