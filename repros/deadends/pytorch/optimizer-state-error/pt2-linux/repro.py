"""Reproducer: "optimizer state dict mismatch" (deadends.dev pytorch/optimizer-state-error/pt2-linux).

An Adam optimizer trains a small model for a few steps and its state is saved with the
model; it is then restored into a fresh optimizer for a model whose parameters differ
(an extra layer, a wider layer, another split into parameter groups). Variants that
restore must leave the optimizer with the saved moments, so that the next step equals
the one an uninterrupted run takes.
"""

from __future__ import annotations

import io
import math

import torch
from torch import nn

STEPS = 3


class TwoHidden(nn.Module):
    """Two 8x8 hidden layers; ``refactored``: the same layers, by the same names (its
    state_dict loads), defined in the other order, so model.parameters() lists them swapped."""

    def __init__(self, refactored: bool = False) -> None:
        super().__init__()
        if refactored:
            self.second = nn.Linear(8, 8)
            self.first = nn.Linear(8, 8)
        else:
            self.first = nn.Linear(8, 8)
            self.second = nn.Linear(8, 8)
        self.inp = nn.Linear(4, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.inp(x))
        return self.out(torch.relu(self.second(torch.relu(self.first(x)))))


def make(kind: str, device: str) -> nn.Module:
    torch.manual_seed(0)
    if kind in ("two-hidden", "refactored"):
        return TwoHidden(refactored=kind == "refactored").to(device)
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


def saved_run(device, two_groups=False, kind="base"):
    """A run of a ``kind`` of model that is saved: STEPS Adam steps (in two parameter groups
    where ``two_groups``), its checkpoint (model and optimizer), and what an uninterrupted
    run does next."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 4, generator=g).to(device)
    y = torch.randn(16, 2, generator=g).to(device)
    old = make(kind, device)
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


def resume(device, kind="base", two_groups=False, load_model=None, load=None, saved="base") -> dict:
    """A fresh ``kind`` of model (its weights restored from the checkpoint where
    ``load_model``, default: the same architecture) and Adam, ``load(opt, checkpoint, notes)``
    (default optimizer.load_state_dict), one more step; against the uninterrupted run of
    the ``saved`` kind."""
    x, y, checkpoint, saved_steps, reference, continued = saved_run(device, two_groups, saved)
    model = make(kind, device)
    notes = []
    same_names = kind == saved or {kind, saved} == {"two-hidden", "refactored"}
    if same_names if load_model is None else load_model:
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
    # the baseline's situation (the model gained a layer) with the checkpoint written as one:
    # the 3-layer run's model and optimizer, saved together, restored together
    return resume(device, "extra", saved="extra")


def workaround1_save_together_changed_model(device, precision):
    return resume(device, "extra", load_model=True)


def workaround2_verify_then_load(device, precision):
    return verify_then_load(device, "extra")


def verify_then_load(device, kind, lr=1e-2) -> dict:
    """The checkpoint's parameter shapes compared with a fresh ``kind`` of model's before
    its optimizer loads the saved state (a fresh state where they differ); then training."""
    x, y, checkpoint, *_ = saved_run(device)
    model = make(kind, device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    saved = {k: tuple(v.shape) for k, v in checkpoint["model"].items()}
    now = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    matches = saved == now
    note = "shapes match: %s (saved %s, model %s)" % (matches, saved, now)
    if matches:
        opt.load_state_dict(checkpoint["optimizer"])
    before = [p.detach().clone() for p in model.parameters()]
    losses = [step(model, opt, x, y) for _ in range(STEPS)]
    moved = [bool((p.detach() - b).abs().max() > 0) for p, b in zip(model.parameters(), before)]
    return {
        "mismatch_detected": {"ok": not matches, "detail": note},
        "trains_after": {
            "ok": all(moved) and all(math.isfinite(v) for v in losses) and losses[-1] < losses[0],
            "detail": "after the check, %d steps: losses %s; every parameter moved: %s"
            % (STEPS, losses, all(moved)),
        },
    }


def deadend1_reset_optimizer(device, precision):
    return resume(device, load=lambda opt, checkpoint, notes: None)


def deadend2_ignore_load_error(device, precision):
    """The load wrapped in try/except, training on, where the model was refactored (the same
    layers defined in another order): nothing raises, and Adam's moments, matched by
    position, land on the wrong layers: the silent corruption the entry describes."""

    def ignore_errors(opt, checkpoint, notes):
        try:
            opt.load_state_dict(checkpoint["optimizer"])
            notes.append("load_state_dict raised nothing")
        except (ValueError, RuntimeError, KeyError) as exc:
            notes.append("ignored %s: %s" % (type(exc).__name__, exc))

    return resume(device, "refactored", load=ignore_errors, saved="two-hidden")


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
