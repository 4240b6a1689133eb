"""Reproducer: "register_hook callback raised exception" (deadends/pytorch/hook-error/pt2-linux).

Gradient monitoring with Tensor.register_hook on a hidden activation: the hook records the
gradient's norm each step and, in the baselines, goes wrong the way such callbacks do (it
returns a gradient of another shape, or raises inside). Each variant applies one workaround
or dead end of the knowledge-base entry (https://deadends.dev/pytorch/hook-error/pt2-linux).

    python repro.py --list
    python repro.py --variant baseline-hook-returns-wrong-shape --device cpu --precision fp32
"""

from __future__ import annotations

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
    "baseline-hook-returns-wrong-shape": "the hook returns grad.mean(0) (another shape) instead of None or a same-shape tensor",
    "baseline-hook-raises": "the hook indexes a per-feature scale list one entry too short (IndexError inside the hook)",
    "workaround1-checked-hook": "the hook checks the gradient's shape and device and returns None (records only)",
    "workaround2-retain-grad": "no hook: hidden.retain_grad(), the norm read from hidden.grad after backward",
    "deadend1-remove-hooks": "the hook removed (handle.remove()) before training",
    "deadend2-catch-all": "the raising hook's body wrapped in try/except Exception: pass",
    "control-correct-hook": "a hook that records the norm and returns None",
}
NOT_WRITTEN = []

STEPS = 3
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
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
    norms = []
    scale = [1.0, 1.0]  # one entry short of the 3 hidden features

    def hook(grad):
        if variant == "baseline-hook-returns-wrong-shape":
            norms.append(grad.float().norm().item())
            return grad.mean(0)
        if variant in ("baseline-hook-raises", "deadend2-catch-all"):
            try:
                norms.append(
                    sum(scale[j] * grad[:, j].float().norm().item() for j in range(grad.shape[1]))
                )
            except Exception:
                if variant == "baseline-hook-raises":
                    raise
            return None
        checked = variant == "workaround1-checked-hook"
        if checked and (grad.shape != hidden.shape or grad.device != hidden.device):
            raise RuntimeError(
                "hook got grad %s on %s for %s on %s"
                % (grad.shape, grad.device, hidden.shape, hidden.device)
            )
        norms.append(grad.float().norm().item())
        return None

    expected = []
    for _ in range(STEPS):
        opt.zero_grad()
        # the reference: the same step's hidden gradient on a separate graph with no hook
        ref_hidden = torch.tanh(first(x))
        ref_loss = (second(ref_hidden) - y).float().pow(2).mean()
        expected.append(torch.autograd.grad(ref_loss, ref_hidden)[0].float().norm().item())
        hidden = torch.tanh(first(x))
        if variant == "workaround2-retain-grad":
            hidden.retain_grad()
        else:
            handle = hidden.register_hook(hook)
            if variant == "deadend1-remove-hooks":
                handle.remove()
        loss = (second(hidden) - y).float().pow(2).mean()
        loss.backward()
        if variant == "workaround2-retain-grad":
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
        "weights_trained": {
            "ok": first.weight.grad is not None and first.weight.grad.shape == first.weight.shape,
            "detail": "first.weight.grad %s"
            % ((None if first.weight.grad is None else tuple(first.weight.grad.shape)),),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
