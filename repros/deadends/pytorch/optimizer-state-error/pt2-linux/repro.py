"""Reproducer: "optimizer state dict mismatch" (deadends.dev pytorch/optimizer-state-error/pt2-linux).

An Adam optimizer trains a small model for a few steps and its state is saved with the
model; it is then restored into a fresh optimizer for a model whose parameters differ
(an extra layer, a wider layer, another split into parameter groups). Variants that
restore must leave the optimizer with the saved moments, so that the next step equals
the one an uninterrupted run takes.
"""

from __future__ import annotations

import io

import torch
from torch import nn

STEPS = 3


def make(kind: str, device: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "extra":
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    elif kind == "wider":
        net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    else:
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return net.to(device)


def step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.item()


def roundtrip(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def saved_run(device, two_groups=False):
    """A run that is saved: STEPS Adam steps (in two parameter groups where ``two_groups``),
    its checkpoint (model and optimizer), and what an uninterrupted run does next."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 4, generator=g).to(device)
    y = torch.randn(16, 2, generator=g).to(device)
    old = make("base", device)
    if two_groups:
        old_opt = torch.optim.Adam(
            [{"params": old[0].parameters()}, {"params": old[2].parameters(), "lr": 1e-3}], lr=1e-2
        )
    else:
        old_opt = torch.optim.Adam(old.parameters(), lr=1e-2)
    for _ in range(STEPS):
        step(old, old_opt, x, y)
    checkpoint = roundtrip({"model": old.state_dict(), "optimizer": old_opt.state_dict()})
    # read now: a loaded optimizer may keep the checkpoint's step tensors and count on in them
    saved_steps = {k: int(v["step"]) for k, v in checkpoint["optimizer"]["state"].items()}
    # what an uninterrupted run does next
    reference = {k: v.clone() for k, v in old.state_dict().items()}
    step(old, old_opt, x, y)
    continued = {k: v.detach().clone() for k, v in old.state_dict().items()}
    return x, y, checkpoint, saved_steps, reference, continued


def resume(device, kind="base", two_groups=False, load_model=None, load=None) -> dict:
    """A fresh ``kind`` of model (its weights restored from the checkpoint where
    ``load_model``, default: the same architecture) and Adam, ``load(opt, checkpoint, notes)``
    (default optimizer.load_state_dict), one more step; against the uninterrupted run."""
    x, y, checkpoint, saved_steps, reference, continued = saved_run(device, two_groups)
    model = make(kind, device)
    notes = []
    if kind == "base" if load_model is None else load_model:
        # restoring the model first, as a checkpoint does
        model.load_state_dict(checkpoint["model"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    if load is None:
        opt.load_state_dict(checkpoint["optimizer"])
    else:
        load(opt, checkpoint, notes)
    step(model, opt, x, y)
    restored = opt.state_dict()["state"]
    same_state = len(restored) == len(saved_steps) and all(
        k in restored and int(restored[k]["step"]) == saved_steps[k] + 1 for k in saved_steps
    )
    after = model.state_dict()
    same_step = set(after) == set(continued) and all(
        after[k].shape == continued[k].shape
        and bool(torch.allclose(after[k], continued[k], atol=1e-6))
        for k in continued
    )
    return {
        "state_restored": {
            "ok": same_state,
            "detail": "saved state for %d tensors (step %s); after one more step the optimizer holds %d (steps %s); %s"
            % (
                len(saved_steps),
                sorted(set(saved_steps.values())),
                len(restored),
                sorted({int(s["step"]) for s in restored.values()}),
                "; ".join(notes),
            ),
        },
        "continues_like_uninterrupted": {
            "ok": same_step,
            "detail": "parameters after the next step equal an uninterrupted run's: %s (started from the saved weights: %s)"
            % (same_step, set(reference) == set(after)),
        },
    }


def baseline_extra_layer(device, precision):
    return resume(device, "extra")


def baseline_param_groups(device, precision):
    return resume(device, two_groups=True)


def baseline_wider_layer(device, precision):
    return resume(device, "wider")


def workaround1_save_together(device, precision):
    return resume(device)


def workaround1_save_together_changed_model(device, precision):
    return resume(device, "extra", load_model=True)


def workaround2_verify_then_load(device, precision):
    x, y, checkpoint, *_ = saved_run(device)
    model = make("extra", device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    saved = {k: tuple(v.shape) for k, v in checkpoint["model"].items()}
    now = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    matches = saved == now
    note = "shapes match: %s (saved %s, model %s)" % (matches, saved, now)
    if matches:
        opt.load_state_dict(checkpoint["optimizer"])
    step(model, opt, x, y)
    return {
        "mismatch_detected": {"ok": not matches, "detail": note},
        "trains_after": {
            "ok": all(bool(torch.isfinite(p).all()) for p in model.parameters()),
            "detail": "the model trains on with a fresh optimizer state",
        },
    }


def deadend1_reset_optimizer(device, precision):
    return resume(device, load=lambda opt, checkpoint, notes: None)


def deadend2_ignore_load_error(device, precision):
    def ignore_errors(opt, checkpoint, notes):
        try:
            opt.load_state_dict(checkpoint["optimizer"])
        except (ValueError, RuntimeError, KeyError) as exc:
            notes.append("ignored %s: %s" % (type(exc).__name__, exc))

    return resume(device, "extra", load=ignore_errors)


def control_same_model(device, precision):
    return resume(device)


VARIANTS = {
    "baseline-extra-layer": baseline_extra_layer,
    "baseline-param-groups": baseline_param_groups,
    "baseline-wider-layer": baseline_wider_layer,
    "workaround1-save-together": workaround1_save_together,
    "workaround1-save-together-changed-model": workaround1_save_together_changed_model,
    "workaround2-verify-then-load": workaround2_verify_then_load,
    "deadend1-reset-optimizer": deadend1_reset_optimizer,
    "deadend2-ignore-load-error": deadend2_ignore_load_error,
    "control-same-model": control_same_model,
}
