"""Reproducer: "AttributeError: 'Tensor' object has no attribute 'grad'"
(deadends/python/attributeerror-tensor-no-grad/torch2.1-linux).

A tensor learned by hand beside a model (a learnable input, updated with its own gradient
after each backward()) that never joined the graph: created without requires_grad, or made
from a learnable tensor under torch.no_grad(). The baselines read its .grad after
backward(), and use it as a tensor (its norm, logged each step). Each variant applies one
workaround or dead end of the knowledge-base entry
(https://deadends.dev/python/attributeerror-tensor-no-grad/torch2.1-linux).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, moved
from torch import nn

LR = 0.1
STEPS = 3


def plain():
    """The learned tensor as the baseline makes it: no requires_grad."""
    return torch.arange(8.0).view(2, 4) / 8


def tracked():
    return (torch.arange(8.0).view(2, 4) / 8).requires_grad_(True)


def as_is(x):
    return x


def scaled_under_no_grad(x):
    # a preprocessing step put under no_grad by mistake: the result leaves the graph
    with torch.no_grad():
        return x * 2.0


def scaled(x):
    return x * 2.0


def grad_of(x, loss):
    return x.grad


def backward(loss):
    loss.backward()


def train(
    precision,
    make=plain,
    prepare=as_is,
    read=grad_of,
    back=backward,
    lr=LR,
    steps=STEPS,
    learned="input",
) -> dict:
    """``steps`` updates of the learned tensor (``make()``, fed through ``prepare``), each
    from the gradient ``read(x, loss)`` returns after ``back(loss)``, its norm logged;
    ``learned="weight"`` learns the Linear model's weight the same way instead."""
    if precision != "fp32":
        raise Unsupported(
            "whether a tensor gets a gradient does not depend on precision: fp32 only"
        )
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x = make()
    target = torch.tensor([[1.0], [-1.0]])
    watched = model.weight if learned == "weight" else x
    before = watched.detach().clone()
    norms = []
    for _ in range(steps):
        loss = ((model(prepare(x)) - target) ** 2).mean()
        back(loss)
        grad = read(watched, loss)
        norms.append(grad.norm().item())  # AttributeError where grad is None
        with torch.no_grad():
            watched -= lr * grad
        for t in (x, model.weight, model.bias):
            t.grad = None
    return {
        "grad_present": {
            "ok": len(norms) == steps,
            "detail": "gradient norms %s" % ["%.4f" % n for n in norms],
        },
        "tensor_trained": moved(
            {learned: before}, {learned: watched.detach()}, what="learned %s" % learned
        ),
    }


def grad_after_backward(precision, make=plain) -> dict:
    """One backward(), then only x.grad read: whether there is one."""
    if precision != "fp32":
        raise Unsupported(
            "whether a tensor gets a gradient does not depend on precision: fp32 only"
        )
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x = make()
    ((model(x) - 1.0) ** 2).mean().backward()
    grad = x.grad
    return {
        "grad_present": {
            "ok": grad is not None,
            "detail": "x.grad is %s"
            % ("None" if grad is None else "a tensor of shape %s" % list(grad.shape)),
        }
    }


def baseline_read_grad(device, precision):
    return grad_after_backward(precision)


def baseline_grad_norm(device, precision):
    return train(precision)


def baseline_prepared_under_no_grad(device, precision):
    return train(precision, make=tracked, prepare=scaled_under_no_grad)


def workaround1_requires_grad_at_creation(device, precision):
    return train(precision, make=tracked)


def workaround2_no_grad_only_for_inference(device, precision):
    return train(precision, make=tracked, prepare=scaled)


def workaround3_check_leaf_first(device, precision):
    def checked():
        x = plain()
        # the diagnosis: requires_grad, is_leaf, grad_fn; a leaf outside the graph is fixed
        if not x.requires_grad and x.is_leaf and x.grad_fn is None:
            x.requires_grad_(True)
        return x

    return train(precision, make=checked)


def deadend1_backward_again(device, precision):
    def again(x, loss):
        if x.grad is None:
            loss.backward()  # the graph was freed by the first backward()
        return x.grad

    return train(precision, read=again)


def deadend1_backward_again_retain_graph(device, precision):
    def twice(loss):
        loss.backward(retain_graph=True)
        loss.backward()  # the retained graph takes a second backward()

    return train(precision, back=twice)


def deadend2_detach_literal(device, precision):
    return train(precision, read=lambda x, loss: x.detach().grad)


def deadend2_detach_tracked(device, precision):
    return train(precision, make=tracked, read=lambda x, loss: x.detach().grad)


def deadend3_default_zero(device, precision):
    def guarded(x, loss):
        try:
            x.grad.norm()
            return x.grad
        except AttributeError:
            return torch.zeros_like(x)

    return train(precision, read=guarded)


def control_parameter_grad(device, precision):
    return train(precision, learned="weight")


VARIANTS = {
    "baseline-read-grad": baseline_read_grad,
    "baseline-grad-norm": baseline_grad_norm,
    "baseline-prepared-under-no-grad": baseline_prepared_under_no_grad,
    "workaround1-requires-grad-at-creation": workaround1_requires_grad_at_creation,
    "workaround2-no-grad-only-for-inference": workaround2_no_grad_only_for_inference,
    "workaround3-check-leaf-first": workaround3_check_leaf_first,
    "deadend1-backward-again": deadend1_backward_again,
    "deadend1-backward-again-retain-graph": deadend1_backward_again_retain_graph,
    "deadend2-detach-literal": deadend2_detach_literal,
    "deadend2-detach-tracked": deadend2_detach_tracked,
    "deadend3-default-zero": deadend3_default_zero,
    "control-parameter-grad": control_parameter_grad,
}
