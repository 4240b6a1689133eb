"""Reproducer: "Loss is nan at step N" (deadends/pytorch/loss-nan/pt2-linux).

A small regression network (Linear, BatchNorm1d, ReLU, Linear) trained with SGD for 60
steps, in the entry's two situations: a learning rate far above what the network tolerates,
and a NaN in the data. torch reports nothing for a NaN loss by itself: the baselines train as
documented and the harness records what comes instead (postconditions on the loss and the
weights). Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/loss-nan/pt2-linux).

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
    "baseline-lr-too-high": "SGD at lr=1.0: the loss overflows to inf, then NaN",
    "baseline-nan-in-data": "SGD at lr=0.01; one feature of one sample is NaN",
    "workaround1-check-data": "NaN data: rows with a non-finite value found with torch.isfinite and dropped before training",
    "workaround2-literal-detect-anomaly": "lr=1.0 under torch.autograd.set_detect_anomaly(True), as a fix: training must end with a finite loss",
    "workaround2-sensible-diagnose": "lr=1.0 under set_detect_anomaly(True), as a diagnosis: it must stop at the first NaN, naming the operation, before the weights are lost",
    "deadend1-literal-nan-loss-to-zero": "lr=1.0; a NaN loss replaced by 0 (torch.nan_to_num) before backward, training continues",
    "deadend1-sensible-nan-grads-to-zero": "lr=1.0; NaN gradients replaced by 0 before each step, training continues",
    "deadend2-remove-batchnorm": "lr=1.0 with the BatchNorm1d layer removed",
    "control-stable-lr": "SGD at lr=0.01 on clean data",
}
NOT_WRITTEN = []

STEPS = 60
LR_HIGH = 1.0  # far above what the network tolerates
LR_OK = 0.01
BAD_ROW = 5  # the sample whose feature 2 is NaN in the NaN-data variants


def data(device: str, nan: bool):
    g = torch.Generator().manual_seed(0)
    x = 10 * torch.randn(64, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(64, 1, generator=g)
    if nan:
        x[BAD_ROW, 2] = float("nan")
    return x.to(device), y.to(device)


def network(batchnorm: bool = True) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(4, 16)]
    if batchnorm:
        layers.append(nn.BatchNorm1d(16))
    layers += [nn.ReLU(), nn.Linear(16, 1)]
    return nn.Sequential(*layers)


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("the divergence is a property of the learning rate, measured in fp32")
    nan_data = variant in ("baseline-nan-in-data", "workaround1-check-data")
    x, y = data(device, nan_data)
    checks = {}
    if variant == "workaround1-check-data":
        finite_rows = torch.isfinite(x).all(dim=1) & torch.isfinite(y).all(dim=1)
        dropped = [i for i, keep in enumerate(finite_rows.tolist()) if not keep]
        checks["found_the_bad_rows"] = {
            "ok": dropped == [BAD_ROW],
            "detail": "rows dropped %s; the NaN was put in row %d" % (dropped, BAD_ROW),
        }
        x, y = x[finite_rows], y[finite_rows]
    model = network(batchnorm=variant != "deadend2-remove-batchnorm").to(device)
    lr = (
        LR_OK
        if variant in ("baseline-nan-in-data", "workaround1-check-data", "control-stable-lr")
        else LR_HIGH
    )
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    if variant.startswith("workaround2-"):
        torch.autograd.set_detect_anomaly(True)
        try:
            if variant == "workaround2-literal-detect-anomaly":
                losses = train(variant, model, opt, x, y)
            else:
                return diagnose(model, opt, x, y)
        finally:
            torch.autograd.set_detect_anomaly(False)
    else:
        losses = train(variant, model, opt, x, y)
    checks.update(outcome_checks(model, x, y, losses))
    return checks


def train(variant, model, opt, x, y) -> list:
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        losses.append(loss.item())
        if variant == "deadend1-literal-nan-loss-to-zero":
            loss = torch.nan_to_num(loss, nan=0.0)
        loss.backward()
        if variant == "deadend1-sensible-nan-grads-to-zero":
            for p in model.parameters():
                if p.grad is not None:
                    p.grad = torch.nan_to_num(p.grad, nan=0.0)
        opt.step()
    return losses


def weights_finite(model) -> dict:
    bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    return {"ok": not bad, "detail": "parameters with non-finite values: %s" % bad}


def outcome_checks(model, x, y, losses) -> dict:
    with torch.no_grad():
        final = (model(x) - y).pow(2).mean().item()
    first_bad = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
    return {
        "loss_finite": {
            "ok": first_bad is None,
            "detail": "first non-finite loss at step %s of %d" % (first_bad, len(losses)),
        },
        "fits_the_data": {
            "ok": math.isfinite(final) and final < losses[0] / 10,
            "detail": "loss %.4g at step 0, %.4g with the final weights" % (losses[0], final),
        },
        "weights_finite": weights_finite(model),
    }


def diagnose(model, opt, x, y) -> dict:
    """Anomaly detection as a diagnosis: where does it stop, and what does it name?"""
    stopped_at, message = None, ""
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        losses.append(loss.item())
        try:
            loss.backward()
        except RuntimeError as exc:  # the diagnosis is this exception: it is the variant's result
            if "nan" not in str(exc).lower():
                raise
            stopped_at, message = step, str(exc).splitlines()[0]
            break
        opt.step()
    first_bad = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
    return {
        "anomaly_reported": {
            "ok": stopped_at is not None and "returned nan values" in message,
            "detail": "stopped at step %s: %s" % (stopped_at, message or "no anomaly reported"),
        },
        "stopped_at_the_first_bad_step": {
            "ok": stopped_at is not None and stopped_at == first_bad,
            "detail": "stopped at step %s; first non-finite loss at step %s"
            % (stopped_at, first_bad),
        },
        "weights_finite_when_stopped": weights_finite(model),
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
