"""Reproducer: "RuntimeError: expected scalar type Half but found Float"
(deadends/cuda/mixed-precision-dtype-error/cuda12-a100).

Mixed precision done by hand: a small model cast to float16 (model.half()) trained on a
float32 batch outside autocast. The first matmul meets a float16 weight and a float32 input
and its dtype check raises, on CPU as on CUDA (the check is the op's own, before any kernel;
its wording changed across torch releases: entry.yaml's `reworded`). Each variant applies one
workaround or dead end of https://deadends.dev/cuda/mixed-precision-dtype-error/cuda12-a100
and trains a few steps; torch.cuda.amp's own spelling (workaround 1 as written) runs on cuda
cells only, torch.autocast on both devices.
"""

from __future__ import annotations

import contextlib

import torch
from reprokit import Unsupported, autocast, autocast_dtype, finite, make_scaler, moved
from torch import nn

# an unnormalised regression target, in the hundreds: while the model's output is still
# near 0, each squared error (about 300**2) is past float16's largest value (65504), so a
# loss computed in float16 overflows where one in float32 does not; the learning rate is
# small enough for float32 to train stably on it
TARGET_OFFSET = 300.0
TARGET_SCALE = 30.0
LR = 1e-4
# GradScaler skips the steps whose scaled gradients overflow float16 while it halves its
# scale from 2**16: about ten on losses near 1e5, so the training runs long enough for it
# to land steps
STEPS = 16


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def require_half(device, precision):
    """Precondition: fp16 cells only (the error is about float16), and this torch runs a
    float16 matmul on ``device`` (older CPU builds have no float16 addmm at all)."""
    if precision != "fp16":
        raise Unsupported("the documented mismatch is float16 against float32: fp16 only")
    if device == "cuda" and not torch.cuda.is_available():
        raise Unsupported("no CUDA device here")
    a = torch.ones(2, 2, device=device, dtype=torch.float16)
    try:
        torch.addmm(a, a, a)
    except RuntimeError as exc:
        raise Unsupported("this torch has no float16 matmul on %s: %s" % (device, exc))


def ran_in(outputs, dtype):
    """Every forward's output had ``dtype`` (the forward really ran in it)."""
    got = sorted(set(str(d) for d in outputs))
    ok = bool(outputs) and got == [str(dtype)]
    return {"ok": ok, "detail": "forward outputs: %s; expected %s" % (got or "none", dtype)}


def train(
    device,
    model_dtype,
    batch_dtype,
    forward_ctx=None,
    loss_in_ctx=True,
    loss_dtype=None,
    scaler=None,
):
    """STEPS SGD steps of Net (weights in ``model_dtype``) on a batch in ``batch_dtype``; the
    forward inside ``forward_ctx()`` (the loss too where ``loss_in_ctx``), the loss computed
    in ``loss_dtype`` (default: the output's), scaled by ``scaler`` if given. Returns the
    losses, the forwards' output dtypes, the parameters before and after, the grads' finiteness."""
    torch.manual_seed(0)
    model = Net().to(device=device, dtype=model_dtype)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x = torch.randn(32, 8, device=device, dtype=batch_dtype)
    y = (TARGET_OFFSET + TARGET_SCALE * x.float().sum(dim=1, keepdim=True)).to(batch_dtype)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses, outputs, grads_ok = [], [], True
    for _ in range(STEPS):
        opt.zero_grad()
        ctx = forward_ctx() if forward_ctx is not None else contextlib.nullcontext()
        with ctx:
            out = model(x)
            if loss_in_ctx:
                loss = _loss(out, y, loss_dtype)
        if not loss_in_ctx:
            loss = _loss(out, y, loss_dtype)
        outputs.append(out.dtype)
        losses.append(loss.item())
        if scaler is not None:
            # GradScaler skips the steps whose gradients overflowed, by design: no finiteness
            # to check on its gradients (grads_ok None: the postcondition is not reported)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            grads_ok = None
        else:
            loss.backward()
            grads_ok = grads_ok and all(
                bool(torch.isfinite(p.grad).all()) for p in model.parameters()
            )
            opt.step()
    after = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, outputs, before, after, grads_ok


def _loss(out, y, dtype):
    if dtype is not None:
        out, y = out.to(dtype), y.to(dtype)
    return nn.functional.mse_loss(out, y.to(out.dtype) if dtype is None else y)


def checks(run, half_forward=True):
    losses, outputs, before, after, grads_ok = run
    result = {"loss_finite": finite(losses), "params_moved": moved(before, after)}
    if grads_ok is not None:
        result["grads_finite"] = {
            "ok": grads_ok,
            "detail": "every gradient finite" if grads_ok else "a gradient was inf or nan",
        }
    if half_forward:
        result["forward_in_half"] = ran_in(outputs, torch.float16)
    return result


def baseline_half_model_float_batch(device, precision):
    require_half(device, precision)
    return checks(train(device, torch.float16, torch.float32))


def workaround1_cuda_amp_autocast_literal(device, precision):
    require_half(device, precision)
    # as written: torch.cuda.amp.autocast() around the forward and the loss (cuda cells only)
    return checks(train(device, torch.float16, torch.float32, torch.cuda.amp.autocast))


def workaround1_autocast_sensible(device, precision):
    require_half(device, precision)
    dtype = autocast_dtype(device, precision)
    return checks(train(device, torch.float16, torch.float32, lambda: autocast(device, dtype)))


def workaround2_loss_outside_autocast(device, precision):
    require_half(device, precision)
    dtype = autocast_dtype(device, precision)
    run = train(
        device,
        torch.float16,
        torch.float32,
        lambda: autocast(device, dtype),
        loss_in_ctx=False,
        loss_dtype=torch.float32,
    )
    return checks(run)


def workaround3_gradscaler_literal(device, precision):
    require_half(device, precision)
    dtype = autocast_dtype(device, precision)
    scaler, _ = make_scaler(device)
    # the half model of the baseline, its forward under autocast, its loss scaled
    run = train(
        device, torch.float16, torch.float32, lambda: autocast(device, dtype), scaler=scaler
    )
    return checks(run)


def workaround3_gradscaler_amp_recipe(device, precision):
    require_half(device, precision)
    dtype = autocast_dtype(device, precision)
    scaler, _ = make_scaler(device)
    # the recipe GradScaler is made for: float32 weights, the forward under autocast
    run = train(
        device, torch.float32, torch.float32, lambda: autocast(device, dtype), scaler=scaler
    )
    return checks(run)


def require_half_training(device):
    """Precondition of dead end 1: this torch has float16 backward kernels for the ops the
    training uses (relu, mse_loss) on ``device``; older CPU builds lack them."""
    a = torch.ones(2, 2, device=device, dtype=torch.float16, requires_grad=True)
    try:
        nn.functional.mse_loss(torch.relu(a), torch.zeros_like(a)).backward()
    except RuntimeError as exc:
        raise Unsupported("this torch cannot train in float16 on %s: %s" % (device, exc))


def deadend1_cast_everything_half(device, precision):
    require_half(device, precision)
    require_half_training(device)
    # the batch, the targets and so the loss and its gradients all in float16
    return checks(train(device, torch.float16, torch.float16))


def control_float32(device, precision):
    require_half(device, precision)
    # no half anywhere: the same training in float32 (mixed precision not attempted)
    return checks(train(device, torch.float32, torch.float32), half_forward=False)


VARIANTS = {
    "baseline-half-model-float-batch": baseline_half_model_float_batch,
    "workaround1-cuda-amp-autocast-literal": workaround1_cuda_amp_autocast_literal,
    "workaround1-autocast-sensible": workaround1_autocast_sensible,
    "workaround2-loss-outside-autocast": workaround2_loss_outside_autocast,
    "workaround3-gradscaler-literal": workaround3_gradscaler_literal,
    "workaround3-gradscaler-amp-recipe": workaround3_gradscaler_amp_recipe,
    "deadend1-cast-everything-half": deadend1_cast_everything_half,
    "control-float32": control_float32,
}
