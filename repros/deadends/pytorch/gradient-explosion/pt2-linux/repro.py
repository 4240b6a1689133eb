"""Reproducer: "Loss is NaN or Inf" (deadends/pytorch/gradient-explosion/pt2-linux).

Linear regression on features of scale 10 trained with plain SGD at a learning rate far above
its stability limit: every step overshoots, the weights grow geometrically and the loss goes
to inf and then NaN within the 60 steps. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/gradient-explosion/pt2-linux). torch raises
nothing for a non-finite loss by itself: the baseline trains as documented and the harness
records whatever torch does. The divergence is a property of the learning rate, measured in
fp32 only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

STEPS = 60


def train(device, lr, warmup=False, skip_non_finite=False, clip=None, detect_anomaly=False):
    """STEPS steps of SGD at ``lr`` (with a linear ``warmup`` over the first 10), skipping a
    step whose loss is not finite, clipping the gradient norm to ``clip``, under
    torch.autograd.set_detect_anomaly."""
    torch.manual_seed(0)
    x = 10 * torch.randn(64, 4, device=device)
    true_w = torch.tensor([[1.0], [-2.0], [0.5], [3.0]], device=device)
    y = x @ true_w
    model = nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    if detect_anomaly:
        torch.autograd.set_detect_anomaly(True)
    losses = []
    skipped = 0
    try:
        for step in range(STEPS):
            if warmup:
                for group in opt.param_groups:
                    group["lr"] = lr * min(1.0, (step + 1) / 10)
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            losses.append(loss.item())
            if skip_non_finite and not math.isfinite(loss.item()):
                skipped += 1
                continue
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
    finally:
        if detect_anomaly:
            torch.autograd.set_detect_anomaly(False)
    final = losses[-1]
    finite = [v for v in losses if math.isfinite(v)]
    return {
        "loss_finite": {
            "ok": all(math.isfinite(v) for v in losses),
            "detail": "first non-finite loss at step %s; skipped steps %d"
            % (next((i for i, v in enumerate(losses) if not math.isfinite(v)), None), skipped),
        },
        "loss_reduced_tenfold": {
            "ok": math.isfinite(final) and final < losses[0] / 10,
            "detail": "loss %.4g at step 0, %.4g at step %d (last finite %.4g)"
            % (losses[0], final, STEPS - 1, finite[-1] if finite else float("nan")),
        },
    }


def baseline_lr_too_high(device, precision):
    return train(device, 0.5)


def baseline_detect_anomaly(device, precision):
    return train(device, 0.5, detect_anomaly=True)


def workaround1_clip_grad_norm(device, precision):
    return train(device, 0.5, clip=1.0)


def workaround2_lower_lr_warmup(device, precision):
    return train(device, 0.005, warmup=True)


def deadend1_lr_near_zero(device, precision):
    return train(device, 1e-7)


def deadend2_skip_nan_batches(device, precision):
    return train(device, 0.5, skip_non_finite=True)


def control_stable_lr(device, precision):
    return train(device, 0.005)


VARIANTS = {
    "baseline-lr-too-high": baseline_lr_too_high,
    "baseline-detect-anomaly": baseline_detect_anomaly,
    "workaround1-clip-grad-norm": workaround1_clip_grad_norm,
    "workaround2-lower-lr-warmup": workaround2_lower_lr_warmup,
    "deadend1-lr-near-zero": deadend1_lr_near_zero,
    "deadend2-skip-nan-batches": deadend2_skip_nan_batches,
    "control-stable-lr": control_stable_lr,
}
