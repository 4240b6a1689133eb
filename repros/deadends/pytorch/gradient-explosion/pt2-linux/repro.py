"""Reproducer: "Loss is NaN or Inf" (deadends/pytorch/gradient-explosion/pt2-linux).

Linear regression on features of scale 10 trained with plain SGD at a learning rate far above
its stability limit: every step overshoots, the weights grow geometrically and the loss goes
to inf and then NaN within the 60 steps. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/gradient-explosion/pt2-linux). torch raises
nothing for a non-finite loss by itself: the baseline trains as documented and the harness
records whatever torch does.

    python repro.py --list
    python repro.py --variant baseline-lr-too-high --device cpu --precision fp32
"""

from __future__ import annotations

import math
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
    "baseline-lr-too-high": "SGD at lr=0.5 on features of scale 10 (stable only below about 0.01)",
    "baseline-detect-anomaly": "the same under torch.autograd.set_detect_anomaly(True), torch's own NaN check",
    "workaround1-clip-grad-norm": "the same, with torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) before each step",
    "workaround2-lower-lr-warmup": "lr lowered to 0.005 with a linear warmup over the first 10 steps",
    "deadend1-lr-near-zero": "lr=1e-7",
    "deadend2-skip-nan-batches": "lr=0.5; a step whose loss is not finite is skipped (no backward, no update)",
    "control-stable-lr": "lr=0.005, no warmup",
}
NOT_WRITTEN = []

STEPS = 60
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported(
            "the divergence is a property of the learning rate, measured in fp32 only"
        )
    torch.manual_seed(0)
    x = 10 * torch.randn(64, 4, device=device)
    true_w = torch.tensor([[1.0], [-2.0], [0.5], [3.0]], device=device)
    y = x @ true_w
    model = nn.Linear(4, 1).to(device)
    lr = {
        "baseline-lr-too-high": 0.5,
        "baseline-detect-anomaly": 0.5,
        "workaround1-clip-grad-norm": 0.5,
        "deadend2-skip-nan-batches": 0.5,
        "deadend1-lr-near-zero": 1e-7,
    }.get(variant, 0.005)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    anomaly = variant == "baseline-detect-anomaly"
    if anomaly:
        torch.autograd.set_detect_anomaly(True)
    try:
        losses, skipped = train(variant, model, opt, x, y, lr)
    finally:
        if anomaly:
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


def train(variant, model, opt, x, y, lr):
    losses = []
    skipped = 0
    for step in range(STEPS):
        if variant == "workaround2-lower-lr-warmup":
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / 10)
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        losses.append(loss.item())
        if variant == "deadend2-skip-nan-batches" and not math.isfinite(loss.item()):
            skipped += 1
            continue
        loss.backward()
        if variant == "workaround1-clip-grad-norm":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return losses, skipped


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
