"""Reproducer: "AttributeError: 'Tensor' object has no attribute 'grad'"
(deadends/python/attributeerror-tensor-no-grad/torch2.0-linux).

A tensor learned by hand beside a model (a learnable input, updated with its own gradient
after each backward()) that never joined the graph: created without requires_grad, or made
from a learnable tensor under torch.no_grad(). The baselines read its .grad after
backward(), and use it as a tensor (its norm, logged each step); the record's torch.compile
concern adds a compiled model and a compiled step whose intermediate's gradient is read
(entry.yaml `needs: [torch.compile]`). Each variant applies one
workaround or dead end of the knowledge-base entry
(https://deadends.dev/python/attributeerror-tensor-no-grad/torch2.0-linux).
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
    wrap=None,
) -> dict:
    """``steps`` updates of the learned tensor (``make()``, fed through ``prepare``), each
    from the gradient ``read(x, loss)`` returns after ``back(loss)``, its norm logged;
    ``learned="weight"`` learns the Linear model's weight the same way instead; the model
    is called through ``wrap(model)`` where given (torch.compile)."""
    if precision != "fp32":
        raise Unsupported(
            "whether a tensor gets a gradient does not depend on precision: fp32 only"
        )
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    call = model if wrap is None else wrap(model)
    x = make()
    target = torch.tensor([[1.0], [-1.0]])
    watched = model.weight if learned == "weight" else x
    before = watched.detach().clone()
    norms = []
    for _ in range(steps):
        loss = ((call(prepare(x)) - target) ** 2).mean()
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


def compiled(**options):
    def wrap(fn):
        if not hasattr(torch, "compile"):
            raise Unsupported("this torch has no torch.compile")
        return torch.compile(fn, **options)

    return wrap


def step(raw, model, target, retain=False):
    """One forward: an intermediate made from the learned tensor, then the loss."""
    hidden = raw * 2.0
    if retain:
        hidden.retain_grad()
    return hidden, ((model(hidden) - target) ** 2).mean()


def intermediate_grad(precision, retain=False, wrap=None) -> dict:
    """``step`` (through ``wrap``: torch.compile), backward(), then the intermediate's
    .grad read and used: it must be dloss/dhidden, half the learned leaf's gradient."""
    if precision != "fp32":
        raise Unsupported(
            "whether a tensor gets a gradient does not depend on precision: fp32 only"
        )
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    run = step if wrap is None else wrap(step)
    raw = tracked()
    hidden, loss = run(raw, model, torch.tensor([[1.0], [-1.0]]), retain)
    loss.backward()
    norm = hidden.grad.norm().item()  # AttributeError where the intermediate kept no gradient
    expected = raw.grad / 2.0
    return {
        "grad_correct": {
            "ok": bool(torch.allclose(hidden.grad, expected)),
            "detail": "norm %.4f, max |hidden.grad - raw.grad / 2| = %.3g"
            % (norm, (hidden.grad - expected).abs().max().item()),
        },
    }


def baseline_read_grad(device, precision):
    return grad_after_backward(precision)


def baseline_grad_norm(device, precision):
    return train(precision)


def baseline_prepared_under_no_grad(device, precision):
    return train(precision, make=tracked, prepare=scaled_under_no_grad)


def baseline_compiled_grad_norm(device, precision):
    return train(precision, wrap=compiled())


def baseline_compiled_intermediate(device, precision):
    return intermediate_grad(precision, wrap=compiled())


def workaround1_requires_grad_at_creation(device, precision):
    return train(precision, make=tracked)


def workaround2_no_grad_only_for_inference(device, precision):
    return train(precision, make=tracked, prepare=scaled)


def workaround3_retain_grad_compiled(device, precision):
    return intermediate_grad(precision, retain=True, wrap=compiled())


def workaround4_fullgraph_false(device, precision):
    return train(precision, wrap=compiled(fullgraph=False))


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


def deadend3_disable_compile(device, precision):
    # baseline-compiled-grad-norm with the model called eagerly
    return train(precision)


def control_parameter_grad(device, precision):
    return train(precision, learned="weight")


VARIANTS = {
    "baseline-read-grad": baseline_read_grad,
    "baseline-grad-norm": baseline_grad_norm,
    "baseline-prepared-under-no-grad": baseline_prepared_under_no_grad,
    "baseline-compiled-grad-norm": baseline_compiled_grad_norm,
    "baseline-compiled-intermediate": baseline_compiled_intermediate,
    "workaround1-requires-grad-at-creation": workaround1_requires_grad_at_creation,
    "workaround2-no-grad-only-for-inference": workaround2_no_grad_only_for_inference,
    "workaround3-retain-grad-compiled": workaround3_retain_grad_compiled,
    "workaround4-fullgraph-false": workaround4_fullgraph_false,
    "deadend1-backward-again": deadend1_backward_again,
    "deadend1-backward-again-retain-graph": deadend1_backward_again_retain_graph,
    "deadend2-detach-literal": deadend2_detach_literal,
    "deadend2-detach-tracked": deadend2_detach_tracked,
    "deadend3-disable-compile": deadend3_disable_compile,
    "control-parameter-grad": control_parameter_grad,
}
