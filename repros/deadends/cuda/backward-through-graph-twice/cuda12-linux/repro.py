"""Reproducer: "RuntimeError: Trying to backward through the graph a second time"
(deadends/cuda/backward-through-graph-twice/cuda12-linux).

Autograd frees the tensors a graph saved for its backward pass once backward() has run
through it (unless retain_graph=True). Four programs reach that freed graph again: the same
loss's backward() called twice, two losses that share one encoder's output, each with its own
backward(), a recurrent state carried from one training step into the next, and a GAN whose
discriminator's backward runs through the generator's output before the generator's does.
Each variant follows one workaround or dead end of
https://deadends.dev/cuda/backward-through-graph-twice/cuda12-linux on one of them. The engine raises the error, not a kernel: the same code runs on CPU and CUDA.

Two postconditions: the gradients each step leaves on the parameters equal those of the
step's intended objective, computed again from a fresh forward pass (grads_match_intended;
in the GAN, each network's gradient at its own step against its own loss alone:
d_grads_from_d_loss, g_grads_from_g_loss),
and the saved tensors still held after the last step are no more than after the first
(saved_tensors_bounded, counted through torch.autograd.graph.saved_tensors_hooks): the
dead end's "retain_graph=True leaks memory" as a count that holds on every device.
"""

from __future__ import annotations

import gc
import weakref

import torch
from reprokit import Unsupported
from torch import nn

STEPS = 3


class _Saved:
    """What the pack hook stores in place of a saved tensor: alive while the graph holds it."""

    def __init__(self, tensor):
        self.tensor = tensor


class SavedCounter:
    """Counts the tensors autograd saved (inside ``track()``) that are still held."""

    def __init__(self):
        self.refs = []

    def _pack(self, tensor):
        # detached: holding an output with its grad_fn would make a cycle the graph never frees
        held = _Saved(tensor.detach())
        self.refs.append(weakref.ref(held))
        return held

    @staticmethod
    def _unpack(held):
        return held.tensor

    def track(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def alive(self):
        gc.collect()
        return sum(1 for r in self.refs if r() is not None)


def bounded(counts):
    """The saved tensors held after each step: the last no more than the first."""
    if not counts:
        return {"ok": False, "detail": "no steps were counted"}
    return {
        "ok": counts[-1] <= counts[0],
        "detail": "saved tensors still held after each step: %s" % counts,
    }


def grads_match(steps, atol=1e-6):
    """``steps``: per step, ({name: grad or None} left by the variant, {name: intended grad})."""
    if not steps:
        return {"ok": False, "detail": "no steps were compared"}
    worst, missing = 0.0, []
    for i, (got, want) in enumerate(steps):
        for name, w in want.items():
            g = got.get(name)
            if g is None:
                missing.append("step %d %s" % (i + 1, name))
                continue
            worst = max(worst, (g.float() - w.float()).abs().max().item())
    ok = not missing and worst <= atol
    names = sorted(steps[0][1])
    detail = "max |grad - intended| = %.3g over %d steps of %s" % (
        worst,
        len(steps),
        ", ".join(names),
    )
    if missing:
        detail += "; no gradient: %s" % ", ".join(missing)
    return {"ok": ok, "detail": detail}


class TwoHeads(nn.Module):
    """One encoder, two heads: two losses share the encoder's output."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.head_a = nn.Linear(8, 1)
        self.head_b = nn.Linear(8, 1)

    def forward(self, x):
        h = torch.tanh(self.encoder(x))
        loss_a = self.head_a(h).pow(2).mean()
        loss_b = self.head_b(h).pow(2).mean()
        return loss_a, loss_b


def _setup(device, precision):
    if precision != "fp32":
        raise Unsupported("which graph autograd frees does not depend on precision: fp32 only")
    if device == "cuda" and not torch.cuda.is_available():
        raise Unsupported("no CUDA device here")
    torch.manual_seed(0)


def _grads(model):
    return {
        n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()
    }


def _intended(model, objective):
    params = dict(model.named_parameters())
    names = [n for n in params]
    grads = torch.autograd.grad(objective(), [params[n] for n in names], allow_unused=True)
    return {n: (torch.zeros_like(params[n]) if g is None else g) for n, g in zip(names, grads)}


def two_losses(device, precision, backward, keep_losses=False):
    """STEPS optimizer steps of TwoHeads, each step's gradients from ``backward(model, x)``;
    intended: the gradients of loss_a + loss_b."""
    _setup(device, precision)
    model = TwoHeads().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    counter, counts, steps, kept = SavedCounter(), [], [], []
    for step in range(STEPS):
        x = torch.randn(4, 6, device=device)
        want = _intended(model, lambda x=x: sum(model(x)))
        opt.zero_grad()
        with counter.track():
            losses = backward(model, x)
        steps.append((_grads(model), want))
        if keep_losses:
            kept.extend(losses)  # the losses kept for logging, as tensors
        del losses
        opt.step()
        counts.append(counter.alive())
    return {"grads_match_intended": grads_match(steps), "saved_tensors_bounded": bounded(counts)}


def carried_state(device, precision, detach):
    """A recurrent cell whose state is carried from one step into the next; intended: each
    step's loss through this step's cell only (the carried state taken as given)."""
    _setup(device, precision)
    cell = nn.RNNCell(5, 8).to(device)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)
    counter, counts, steps = SavedCounter(), [], []
    h = torch.zeros(4, 8, device=device)
    for step in range(STEPS):
        x = torch.randn(4, 5, device=device)
        given = h.detach()
        want = _intended(cell, lambda x=x, given=given: cell(x, given).pow(2).mean())
        opt.zero_grad()
        with counter.track():
            if detach:
                h = h.detach()
            h = cell(x, h)
            h.pow(2).mean().backward()
        steps.append((_grads(cell), want))
        opt.step()
        counts.append(counter.alive())
    return {"grads_match_intended": grads_match(steps), "saved_tensors_bounded": bounded(counts)}


def _d_loss(disc, fake, real):
    bce = nn.functional.binary_cross_entropy_with_logits
    said_real, said_fake = disc(real), disc(fake)
    return bce(said_real, torch.ones_like(said_real)) + bce(said_fake, torch.zeros_like(said_fake))


def _g_loss(disc, fake):
    said = disc(fake)
    return nn.functional.binary_cross_entropy_with_logits(said, torch.ones_like(said))


def gan(device, precision, d_sees, g_sees, retain=False, together=False):
    """STEPS iterations of the record's GAN training: fake = G(z) once per iteration; D's
    loss on ``d_sees(fake)`` backpropagated and D's step, then G's loss on a fresh D forward
    of ``g_sees(fake)`` backpropagated and G's step (``together``: both losses backpropagated
    before either network steps). Both networks' gradients are zeroed at the start of each
    iteration, and each is compared, just before its own step, with the gradient of its own
    loss alone: D's of the D loss (G's output taken as given), G's of the G loss through D
    as it is when G's loss is computed."""
    _setup(device, precision)
    gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6)).to(device)
    disc = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
    d_steps, g_steps = [], []
    for step in range(STEPS):
        z = torch.randn(8, 4, device=device)
        real = torch.randn(8, 6, device=device) + 1.0
        opt_d.zero_grad()
        opt_g.zero_grad()
        fake = gen(z)
        want_d = _intended(disc, lambda z=z, real=real: _d_loss(disc, gen(z).detach(), real))
        _d_loss(disc, d_sees(fake), real).backward(retain_graph=retain)
        if not together:
            d_steps.append((_grads(disc), want_d))
            opt_d.step()
        want_g = _intended(gen, lambda z=z: _g_loss(disc, gen(z)))
        _g_loss(disc, g_sees(fake)).backward()
        if together:
            d_steps.append((_grads(disc), want_d))
            opt_d.step()
        g_steps.append((_grads(gen), want_g))
        opt_g.step()
    return {
        "d_grads_from_d_loss": grads_match(d_steps),
        "g_grads_from_g_loss": grads_match(g_steps),
    }


def _as_is(fake):
    return fake


def _detached(fake):
    return fake.detach()


def baseline_same_loss_twice(device, precision):
    def backward(model, x):
        loss_a, loss_b = model(x)
        loss = loss_a + loss_b
        loss.backward()
        loss.backward()  # the graph's saved tensors are gone
        return [loss]

    return two_losses(device, precision, backward)


def _each_its_own(model, x):
    loss_a, loss_b = model(x)
    loss_a.backward()
    loss_b.backward()  # reaches the encoder's graph, freed by loss_a's backward
    return [loss_a, loss_b]


def baseline_shared_tensor(device, precision):
    return two_losses(device, precision, _each_its_own)


def baseline_carried_state(device, precision):
    return carried_state(device, precision, detach=False)


def baseline_gan_shared_fake(device, precision):
    # D's backward runs through G(z) and frees G's graph; G's loss reaches it again
    return gan(device, precision, d_sees=_as_is, g_sees=_as_is)


def workaround1_sum_losses(device, precision):
    def backward(model, x):
        loss_a, loss_b = model(x)
        (loss_a + loss_b).backward()
        return [loss_a, loss_b]

    return two_losses(device, precision, backward)


def workaround2_detach_shared_literal(device, precision):
    # the record's example: d_loss = discriminator(fake_images.detach()), then
    # g_loss = discriminator(fake_images), a separate forward for G's backward
    return gan(device, precision, d_sees=_detached, g_sees=_as_is)


def workaround2_detach_carried_state(device, precision):
    return carried_state(device, precision, detach=True)


def workaround3_retain_first_only(device, precision):
    def backward(model, x):
        loss_a, loss_b = model(x)
        loss_a.backward(retain_graph=True)
        loss_b.backward()  # the last backward frees the graph
        return [loss_a, loss_b]

    return two_losses(device, precision, backward)


def _retain_every_call(model, x):
    loss_a, loss_b = model(x)
    loss_a.backward(retain_graph=True)
    loss_b.backward(retain_graph=True)
    return [loss_a, loss_b]


def deadend1_retain_every_call_literal(device, precision):
    return two_losses(device, precision, _retain_every_call)


def deadend1_retain_every_call_kept_losses(device, precision):
    return two_losses(device, precision, _retain_every_call, keep_losses=True)


def deadend2_zero_grad_between(device, precision):
    def backward(model, x):
        loss_a, loss_b = model(x)
        loss_a.backward()
        model.zero_grad()
        loss_b.backward()
        return [loss_a, loss_b]

    return two_losses(device, precision, backward)


def deadend3_no_grad_backward_literal(device, precision):
    def backward(model, x):
        loss_a, loss_b = model(x)
        loss_a.backward()
        with torch.no_grad():
            loss_b.backward()
        return [loss_a, loss_b]

    return two_losses(device, precision, backward)


def deadend3_no_grad_second_pass(device, precision):
    def backward(model, x):
        loss_a, _ = model(x)
        loss_a.backward()
        with torch.no_grad():  # the second loss computed and backpropagated under no_grad
            _, loss_b = model(x)
            loss_b.backward()
        return [loss_a, loss_b]

    return two_losses(device, precision, backward)


def control_one_backward_per_forward(device, precision):
    def backward(model, x):
        loss = sum(model(x))
        loss.backward()
        return [loss]

    return two_losses(device, precision, backward)


VARIANTS = {
    "baseline-same-loss-twice": baseline_same_loss_twice,
    "baseline-shared-tensor": baseline_shared_tensor,
    "baseline-carried-state": baseline_carried_state,
    "baseline-gan-shared-fake": baseline_gan_shared_fake,
    "workaround1-sum-losses": workaround1_sum_losses,
    "workaround2-detach-shared-literal": workaround2_detach_shared_literal,
    "workaround2-detach-carried-state": workaround2_detach_carried_state,
    "workaround3-retain-first-only": workaround3_retain_first_only,
    "deadend1-retain-every-call-literal": deadend1_retain_every_call_literal,
    "deadend1-retain-every-call-kept-losses": deadend1_retain_every_call_kept_losses,
    "deadend2-zero-grad-between": deadend2_zero_grad_between,
    "deadend3-no-grad-backward-literal": deadend3_no_grad_backward_literal,
    "deadend3-no-grad-second-pass": deadend3_no_grad_second_pass,
    "control-one-backward-per-forward": control_one_backward_per_forward,
}
