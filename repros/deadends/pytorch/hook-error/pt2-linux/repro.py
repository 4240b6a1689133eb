"""Reproducer: "register_hook callback raised exception" (deadends/pytorch/hook-error/pt2-linux).

Gradient monitoring with Tensor.register_hook on a hidden activation: the hook records the
gradient's norm each step and, in the baselines, goes wrong the way such callbacks do (it
returns a gradient of another shape, or raises inside). Each variant applies one workaround
or dead end of the knowledge-base entry (https://deadends.dev/pytorch/hook-error/pt2-linux).
"""

from __future__ import annotations

import torch
from reprokit import Unsupported
from torch import nn

STEPS = 3
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SCALE = [1.0, 1.0]  # one entry short of the 3 hidden features


def monitor(device, precision, make_hook=None, remove=False) -> dict:
    """STEPS training steps; each step's hidden activation gets ``make_hook(norms, hidden)``
    registered (removed at once where ``remove``), or, without one, hidden.retain_grad() and
    the norm read after backward; against the hidden gradient's norm on a hook-free graph."""
    dtype = DTYPES[precision]
    try:  # capability: linear + tanh with backward in this dtype here
        nn.Linear(2, 2).to(device=device, dtype=dtype)(
            torch.ones(1, 2, device=device, dtype=dtype)
        ).tanh().float().sum().backward()
    except RuntimeError as exc:
        raise Unsupported(
            "linear/tanh with backward in %s on %s is not implemented here: %s"
            % (dtype, device, exc)
        )
    torch.manual_seed(0)
    first = nn.Linear(4, 3).to(device=device, dtype=dtype)
    second = nn.Linear(3, 1).to(device=device, dtype=dtype)
    x = torch.randn(8, 4, device=device, dtype=dtype)
    y = torch.randn(8, 1, device=device, dtype=dtype)
    opt = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.1)
    start = first.weight.detach().clone()
    norms = []
    expected = []
    for _ in range(STEPS):
        opt.zero_grad()
        # the reference: the same step's hidden gradient on a separate graph with no hook
        ref_hidden = torch.tanh(first(x))
        ref_loss = (second(ref_hidden) - y).float().pow(2).mean()
        expected.append(torch.autograd.grad(ref_loss, ref_hidden)[0].float().norm().item())
        hidden = torch.tanh(first(x))
        if make_hook is None:
            hidden.retain_grad()
        else:
            handle = hidden.register_hook(make_hook(norms, hidden))
            if remove:
                handle.remove()
        loss = (second(hidden) - y).float().pow(2).mean()
        loss.backward()
        if make_hook is None:
            norms.append(hidden.grad.float().norm().item())
        opt.step()
    close = len(norms) == STEPS and all(
        abs(a - b) <= 1e-3 * max(1.0, abs(b)) for a, b in zip(norms, expected)
    )
    return {
        "gradient_norm_monitored": {
            "ok": close,
            "detail": "recorded %s; the hidden gradient's norms are %s" % (norms, expected),
        },
        # the layer before the hooked activation learns only through the gradient the hook
        # passes on: one that returns zeros (or nothing reaches it) leaves it where it was
        "weights_trained": {
            "ok": bool((first.weight.detach() - start).abs().max() > 0),
            "detail": "max |change| of first.weight after %d steps: %s"
            % (STEPS, (first.weight.detach() - start).abs().max().item()),
        },
    }


def recording_hook(norms, hidden):
    def hook(grad):
        norms.append(grad.float().norm().item())
        return None

    return hook


def scaled_norm_hook(catch_all):
    """A hook that reads SCALE one entry too far (IndexError), or swallows that."""

    def make(norms, hidden):
        def hook(grad):
            try:
                norms.append(
                    sum(SCALE[j] * grad[:, j].float().norm().item() for j in range(grad.shape[1]))
                )
            except Exception:
                if not catch_all:
                    raise
            return None

        return hook

    return make


def baseline_hook_returns_wrong_shape(device, precision):
    return monitor(device, precision, wrong_shape_hook)


def baseline_hook_raises(device, precision):
    return monitor(device, precision, scaled_norm_hook(catch_all=False))


def wrong_shape_hook(norms, hidden):
    """The baseline's faulty hook: records the norm and returns a gradient of another shape."""

    def hook(grad):
        norms.append(grad.float().norm().item())
        return grad.mean(0)

    return hook


def checked(device, precision, make_faulty) -> dict:
    """The hook ``make_faulty`` makes, guarded: what it returns is checked against the
    gradient it was given (shape, device, dtype) and, when it does not fit, dropped (None)
    and counted; the guard must have caught it at every step."""
    caught = []

    def make(norms, hidden):
        faulty = make_faulty(norms, hidden)

        def hook(grad):
            out = faulty(grad)
            if out is not None and (
                out.shape != grad.shape or out.device != grad.device or out.dtype != grad.dtype
            ):
                caught.append(
                    "hook returned %s for a gradient of %s" % (tuple(out.shape), tuple(grad.shape))
                )
                return None
            return out

        return hook

    checks = monitor(device, precision, make)
    checks["guard_caught_the_faulty_hook"] = {
        "ok": len(caught) == STEPS,
        "detail": "the guard dropped %d of %d hook results: %s" % (len(caught), STEPS, caught[:1]),
    }
    return checks


def workaround1_checked_hook(device, precision):
    return checked(device, precision, wrong_shape_hook)


def workaround2_retain_grad(device, precision):
    return monitor(device, precision)


def deadend1_remove_hooks(device, precision):
    return monitor(device, precision, recording_hook, remove=True)


def deadend2_catch_all(device, precision):
    return monitor(device, precision, scaled_norm_hook(catch_all=True))


def control_correct_hook(device, precision):
    return monitor(device, precision, recording_hook)


VARIANTS = {
    "baseline-hook-returns-wrong-shape": baseline_hook_returns_wrong_shape,
    "baseline-hook-raises": baseline_hook_raises,
    "workaround1-checked-hook": workaround1_checked_hook,
    "workaround2-retain-grad": workaround2_retain_grad,
    "deadend1-remove-hooks": deadend1_remove_hooks,
    "deadend2-catch-all": deadend2_catch_all,
    "control-correct-hook": control_correct_hook,
}
