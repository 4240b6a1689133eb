"""Reproducer: "a leaf Variable that requires grad is being used in an in-place operation"
(deadends.dev pytorch/runtime-error-inplace/pt2-linux).

A leaf tensor ``w`` with requires_grad=True is changed in place before it is used in a loss
(``w += 1``, or ``w[0] = 5.0``). Every variant computes the same intended thing: a loss
from the changed values whose gradient reaches ``w``, without overwriting ``w`` itself.
The postconditions compare the loss and ``w.grad`` with values computed by hand.

    python repro.py --list
    python repro.py --variant baseline-augmented-assign --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-augmented-assign": "w += 1 on a leaf that requires grad",
    "baseline-index-assign": "w[0] = 5.0 on a leaf that requires grad",
    "workaround1-out-of-place": "w1 = w + 1 (a new tensor) instead of w += 1",
    "workaround2-clone-then-assign": "w1 = w.clone(); w1[0] = 5.0",
    "deadend1-detach-rebind": "w1 = w.detach(); w1[0] = 5.0; the loss uses w1",
    "deadend1-detach-write-through": "w.detach()[0] = 5.0 (writes through the shared storage); the loss uses w",
    "deadend2-requires-grad-false": "w.requires_grad_(False); w[0] = 5.0; the loss uses w",
    "control-no-inplace": "the loss uses w unchanged",
}
NOT_WRITTEN: list[str] = []

N = 4
VALUE = 5.0  # what element 0 is set to


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    w0 = [0.5, -1.0, 2.0, 3.0]
    c0 = [1.0, 2.0, 3.0, 4.0]
    w = torch.tensor(w0, device=device, requires_grad=True)
    c = torch.tensor(c0, device=device)
    other = torch.tensor([1.0], device=device, requires_grad=True)  # keeps the loss differentiable

    # what the variant means to compute, and the gradient of sum(values * c) w.r.t. w
    if variant in ("baseline-augmented-assign", "workaround1-out-of-place"):
        values = [v + 1 for v in w0]
        grad = list(c0)
    elif variant == "control-no-inplace":
        values, grad = list(w0), list(c0)
    else:
        values = [VALUE] + w0[1:]
        grad = [0.0] + c0[1:]

    if variant == "baseline-augmented-assign":
        w += 1
        used = w
    elif variant == "baseline-index-assign":
        w[0] = VALUE
        used = w
    elif variant == "workaround1-out-of-place":
        used = w + 1
    elif variant == "workaround2-clone-then-assign":
        used = w.clone()
        used[0] = VALUE
    elif variant == "deadend1-detach-rebind":
        used = w.detach()
        used[0] = VALUE
    elif variant == "deadend1-detach-write-through":
        w.detach()[0] = VALUE
        used = w
    elif variant == "deadend2-requires-grad-false":
        w.requires_grad_(False)
        w[0] = VALUE
        used = w
    else:
        used = w

    loss = (used * c).sum() + (other * 2).sum()
    loss.backward()
    expected_loss = sum(v * k for v, k in zip(values, c0)) + 2.0  # noqa: B905 (Python 3.7)
    got_grad = None if w.grad is None else [round(float(g), 6) for g in w.grad]
    leaf_now = [round(float(v), 6) for v in w.detach()]
    return {
        "loss_value": {
            "ok": abs(loss.item() - expected_loss) < 1e-4,
            "detail": "loss %s, expected %s" % (loss.item(), expected_loss),
        },
        "grad_reaches_leaf": {
            "ok": got_grad is not None and got_grad == [round(g, 6) for g in grad],
            "detail": "w.grad %s, expected %s" % (got_grad, grad),
        },
        "leaf_unchanged": {
            "ok": leaf_now == [round(v, 6) for v in w0],
            "detail": "w after the step %s, before %s" % (leaf_now, w0),
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
