"""Reproducer: "a leaf Variable that requires grad is being used in an in-place operation"
(deadends.dev pytorch/runtime-error-inplace/pt2-linux).

A leaf tensor ``w`` with requires_grad=True is changed in place before it is used in a loss
(``w += 1``, or ``w[0] = 5.0``). Every variant computes the same intended thing: a loss
from the changed values whose gradient reaches ``w``, without overwriting ``w`` itself.
The postconditions compare the loss and ``w.grad`` with values computed by hand.
"""

from __future__ import annotations

import torch

N = 4
VALUE = 5.0  # what element 0 is set to
W0 = [0.5, -1.0, 2.0, 3.0]
C0 = [1.0, 2.0, 3.0, 4.0]


def backward_through(device, change, meant="set") -> dict:
    """The loss sum(change(w) * c), its gradient reaching the leaf w; ``meant``: what the
    variant means to compute from w ("add" 1, "set" element 0 to VALUE, or "none")."""
    w = torch.tensor(W0, device=device, requires_grad=True)
    c = torch.tensor(C0, device=device)
    other = torch.tensor([1.0], device=device, requires_grad=True)  # keeps the loss differentiable
    # what the variant means to compute, and the gradient of sum(values * c) w.r.t. w
    if meant == "add":
        values, grad = [v + 1 for v in W0], list(C0)
    elif meant == "none":
        values, grad = list(W0), list(C0)
    else:
        values, grad = [VALUE] + W0[1:], [0.0] + C0[1:]
    used = change(w)
    loss = (used * c).sum() + (other * 2).sum()
    loss.backward()
    expected_loss = sum(v * k for v, k in zip(values, C0)) + 2.0  # noqa: B905 (Python 3.7)
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
            "ok": leaf_now == [round(v, 6) for v in W0],
            "detail": "w after the step %s, before %s" % (leaf_now, W0),
        },
    }


def set_first(t):
    t[0] = VALUE
    return t


def baseline_augmented_assign(device, precision):
    def add_in_place(w):
        w += 1
        return w

    return backward_through(device, add_in_place, "add")


def baseline_index_assign(device, precision):
    return backward_through(device, set_first)


def workaround1_out_of_place(device, precision):
    return backward_through(device, lambda w: w + 1, "add")


def workaround2_clone_then_assign(device, precision):
    return backward_through(device, lambda w: set_first(w.clone()))


def deadend1_detach_rebind(device, precision):
    return backward_through(device, lambda w: set_first(w.detach()))


def deadend1_detach_write_through(device, precision):
    def write_through(w):
        w.detach()[0] = VALUE
        return w

    return backward_through(device, write_through)


def deadend2_requires_grad_false(device, precision):
    return backward_through(device, lambda w: set_first(w.requires_grad_(False)))


def control_no_inplace(device, precision):
    return backward_through(device, lambda w: w, "none")


VARIANTS = {
    "baseline-augmented-assign": baseline_augmented_assign,
    "baseline-index-assign": baseline_index_assign,
    "workaround1-out-of-place": workaround1_out_of_place,
    "workaround2-clone-then-assign": workaround2_clone_then_assign,
    "deadend1-detach-rebind": deadend1_detach_rebind,
    "deadend1-detach-write-through": deadend1_detach_write_through,
    "deadend2-requires-grad-false": deadend2_requires_grad_false,
    "control-no-inplace": control_no_inplace,
}
