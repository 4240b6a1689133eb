"""Reproducer: "Loss is nan at step N" (deadends/pytorch/loss-nan/pt2-linux).

A small regression network (Linear, BatchNorm1d, ReLU, Linear) trained with SGD for 60
steps, in the entry's two situations: a learning rate far above what the network tolerates,
and a NaN in the data. torch reports nothing for a NaN loss by itself: the baselines train as
documented and the harness records what comes instead (postconditions on the loss and the
weights). Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/loss-nan/pt2-linux). The divergence is a property of the
learning rate, measured in fp32.
"""

from __future__ import annotations

import math

import torch
from torch import nn

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


def fit(device, stable=False, nan=False, batchnorm=True, drop_bad_rows=False, **train_options):
    """SGD at LR_OK (``stable``) or LR_HIGH on the data (with a ``nan``), the rows with a
    non-finite value found and dropped first where ``drop_bad_rows``; see train()."""
    x, y = data(device, nan)
    checks = {}
    if drop_bad_rows:
        finite_rows = torch.isfinite(x).all(dim=1) & torch.isfinite(y).all(dim=1)
        dropped = [i for i, keep in enumerate(finite_rows.tolist()) if not keep]
        checks["found_the_bad_rows"] = {
            "ok": dropped == [BAD_ROW],
            "detail": "rows dropped %s; the NaN was put in row %d" % (dropped, BAD_ROW),
        }
        x, y = x[finite_rows], y[finite_rows]
    model = network(batchnorm=batchnorm).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR_OK if stable else LR_HIGH)
    losses = train(model, opt, x, y, **train_options)
    checks.update(outcome_checks(model, x, y, losses))
    return checks


def train(model, opt, x, y, on_loss=None, on_grads=None, detect_anomaly=False) -> list:
    """STEPS steps: ``on_loss(loss)`` -> the loss to backward, ``on_grads(model)`` before each
    step, all under torch.autograd.set_detect_anomaly where ``detect_anomaly``."""
    if detect_anomaly:
        torch.autograd.set_detect_anomaly(True)
    losses = []
    try:
        for _ in range(STEPS):
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            losses.append(loss.item())
            if on_loss is not None:
                loss = on_loss(loss)
            loss.backward()
            if on_grads is not None:
                on_grads(model)
            opt.step()
    finally:
        if detect_anomaly:
            torch.autograd.set_detect_anomaly(False)
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


def baseline_lr_too_high(device, precision):
    return fit(device)


def baseline_nan_in_data(device, precision):
    return fit(device, stable=True, nan=True)


def workaround1_check_data(device, precision):
    return fit(device, stable=True, nan=True, drop_bad_rows=True)


def workaround2_literal_detect_anomaly(device, precision):
    return fit(device, detect_anomaly=True)


def workaround2_sensible_diagnose(device, precision):
    x, y = data(device, False)
    model = network(batchnorm=True).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR_HIGH)
    torch.autograd.set_detect_anomaly(True)
    try:
        return diagnose(model, opt, x, y)
    finally:
        torch.autograd.set_detect_anomaly(False)


def deadend1_literal_nan_loss_to_zero(device, precision):
    return fit(device, on_loss=lambda loss: torch.nan_to_num(loss, nan=0.0))


def deadend1_sensible_nan_grads_to_zero(device, precision):
    def zero_nan_grads(model):
        for p in model.parameters():
            if p.grad is not None:
                p.grad = torch.nan_to_num(p.grad, nan=0.0)

    return fit(device, on_grads=zero_nan_grads)


def deadend2_remove_batchnorm(device, precision):
    return fit(device, batchnorm=False)


def control_stable_lr(device, precision):
    return fit(device, stable=True)


VARIANTS = {
    "baseline-lr-too-high": baseline_lr_too_high,
    "baseline-nan-in-data": baseline_nan_in_data,
    "workaround1-check-data": workaround1_check_data,
    "workaround2-literal-detect-anomaly": workaround2_literal_detect_anomaly,
    "workaround2-sensible-diagnose": workaround2_sensible_diagnose,
    "deadend1-literal-nan-loss-to-zero": deadend1_literal_nan_loss_to_zero,
    "deadend1-sensible-nan-grads-to-zero": deadend1_sensible_nan_grads_to_zero,
    "deadend2-remove-batchnorm": deadend2_remove_batchnorm,
    "control-stable-lr": control_stable_lr,
}
