"""Reproducer: "optimizer state dict mismatch" (deadends.dev pytorch/optimizer-state-error/pt2-linux).

An Adam optimizer trains a small model for a few steps and its state is saved with the
model; it is then restored into a fresh optimizer for a model whose parameters differ
(an extra layer, a wider layer, another split into parameter groups). Variants that
restore must leave the optimizer with the saved moments, so that the next step equals
the one an uninterrupted run takes.

    python repro.py --list
    python repro.py --variant baseline-extra-layer --device cpu --precision fp32
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-extra-layer": "state saved for a 2-layer model, loaded into the optimizer of a 3-layer one",
    "baseline-param-groups": "state saved with two parameter groups, loaded into a one-group optimizer of the same model",
    "baseline-wider-layer": "state saved for Linear(4, 8), loaded for Linear(4, 16) (same number of tensors), then a step",
    "workaround1-save-together": "model and optimizer saved in one checkpoint, restored into the same architecture",
    "workaround1-save-together-changed-model": "the same one-checkpoint save, restored into the 3-layer model",
    "workaround2-verify-then-load": "compare the checkpoint's parameter shapes with the model's before loading the optimizer (3-layer model)",
    "deadend1-reset-optimizer": "same architecture, a fresh optimizer instead of loading the saved state",
    "deadend2-ignore-load-error": "3-layer model, try/except around optimizer.load_state_dict, train on",
    "control-same-model": "same architecture, optimizer.load_state_dict of its own saved state",
}
NOT_WRITTEN: list[str] = []
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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 4, generator=g).to(device)
    y = torch.randn(16, 2, generator=g).to(device)

    # the run that is saved: two parameter groups for baseline-param-groups, one otherwise
    old = make("base", device)
    if variant == "baseline-param-groups":
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

    kind = {
        "baseline-extra-layer": "extra",
        "baseline-wider-layer": "wider",
        "workaround1-save-together-changed-model": "extra",
        "workaround2-verify-then-load": "extra",
        "deadend2-ignore-load-error": "extra",
    }.get(variant, "base")
    model = make(kind, device)
    notes = []
    if kind == "base" or variant == "workaround1-save-together-changed-model":
        model.load_state_dict(
            checkpoint["model"]
        )  # restoring the model first, as a checkpoint does
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    if variant == "workaround2-verify-then-load":
        saved = {k: tuple(v.shape) for k, v in checkpoint["model"].items()}
        now = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        matches = saved == now
        notes.append("shapes match: %s (saved %s, model %s)" % (matches, saved, now))
        if matches:
            opt.load_state_dict(checkpoint["optimizer"])
        step(model, opt, x, y)
        return {
            "mismatch_detected": {"ok": not matches, "detail": "; ".join(notes)},
            "trains_after": {
                "ok": all(bool(torch.isfinite(p).all()) for p in model.parameters()),
                "detail": "the model trains on with a fresh optimizer state",
            },
        }
    if variant == "deadend2-ignore-load-error":
        try:
            opt.load_state_dict(checkpoint["optimizer"])
        except (ValueError, RuntimeError, KeyError) as exc:
            notes.append("ignored %s: %s" % (type(exc).__name__, exc))
    elif variant != "deadend1-reset-optimizer":
        opt.load_state_dict(checkpoint["optimizer"])
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


if __name__ == "__main__":
    sys.exit(
        main(
            run,
            VARIANTS,
            __doc__,
            sys.argv[1:],
            not_written=NOT_WRITTEN,
            fixed_precision={v: "fp32" for v in VARIANTS},
        )
    )
