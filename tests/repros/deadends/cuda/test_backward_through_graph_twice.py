"""deadends/cuda/backward-through-graph-twice/cuda12-linux: each postcondition made to fail on
the real torch of the test interpreter, and each baseline shown raising the documented error.
The records show saved_tensors_bounded failing (dead end 1 with the losses kept); these
tests hold the helpers to it without the records, and make grads_match_intended (which every
finishing variant holds) and the GAN's two postconditions fail."""

from __future__ import annotations

import re

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/backward-through-graph-twice/cuda12-linux"
DOCUMENTED = "Trying to backward through the graph a second time"


@pytest.mark.torch
@pytest.mark.parametrize(
    "variant",
    [
        "baseline-same-loss-twice",
        "baseline-shared-tensor",
        "baseline-carried-state",
        "baseline-gan-shared-fake",
    ],
)
def test_each_baseline_raises_the_documented_error(variant: str) -> None:
    repro = load(ENTRY)
    with pytest.raises(RuntimeError, match=re.escape(DOCUMENTED)):
        repro.VARIANTS[variant]("cpu", "fp32")


@pytest.mark.torch
def test_grads_match_intended_fails_where_a_head_is_cut_off() -> None:
    import torch

    repro = load(ENTRY)

    def second_head_detached(model, x):
        h = torch.tanh(model.encoder(x))
        loss_a = model.head_a(h).pow(2).mean()
        loss_b = model.head_b(h.detach()).pow(2).mean()  # the encoder no longer learns from it
        loss_a.backward()
        loss_b.backward()
        return [loss_a, loss_b]

    checks = repro.two_losses("cpu", "fp32", second_head_detached)
    assert failed(checks) == {"grads_match_intended"}


@pytest.mark.torch
def test_the_records_gan_example_trains_each_network_on_its_own_loss() -> None:
    repro = load(ENTRY)
    checks = repro.VARIANTS["workaround2-detach-shared-literal"]("cpu", "fp32")
    assert set(checks) == {"d_grads_from_d_loss", "g_grads_from_g_loss"}
    assert failed(checks) == set()


@pytest.mark.torch
def test_g_grads_from_g_loss_fails_where_the_detach_is_missing() -> None:
    """No detach on D's path, its graph kept (retain_graph) so that the program runs on: D's
    loss leaves its gradient in G's."""
    repro = load(ENTRY)
    checks = repro.gan("cpu", "fp32", d_sees=repro._as_is, g_sees=repro._as_is, retain=True)
    assert failed(checks) == {"g_grads_from_g_loss"}


@pytest.mark.torch
def test_g_grads_from_g_loss_fails_where_the_detach_is_on_gs_path() -> None:
    repro = load(ENTRY)
    checks = repro.gan("cpu", "fp32", d_sees=repro._detached, g_sees=repro._detached)
    assert failed(checks) == {"g_grads_from_g_loss"}
    assert "no gradient" in checks["g_grads_from_g_loss"]["detail"]


@pytest.mark.torch
def test_d_grads_from_d_loss_fails_where_gs_backward_comes_before_ds_step() -> None:
    """Both losses backpropagated before either network steps: G's loss leaves its gradient
    in D's."""
    repro = load(ENTRY)
    checks = repro.gan("cpu", "fp32", d_sees=repro._detached, g_sees=repro._as_is, together=True)
    assert failed(checks) == {"d_grads_from_d_loss"}


@pytest.mark.torch
def test_grads_match_fails_on_a_missing_or_other_gradient() -> None:
    import torch

    repro = load(ENTRY)
    want = {"w": torch.ones(2)}
    assert repro.grads_match([({"w": torch.ones(2)}, want)])["ok"]
    assert not repro.grads_match([({"w": torch.zeros(2)}, want)])["ok"]
    assert not repro.grads_match([({"w": None}, want)])["ok"]
    assert not repro.grads_match([])["ok"]


@pytest.mark.torch
def test_saved_tensors_bounded_fails_where_retained_graphs_are_kept() -> None:
    repro = load(ENTRY)
    checks = repro.VARIANTS["deadend1-retain-every-call-kept-losses"]("cpu", "fp32")
    assert failed(checks) == {"saved_tensors_bounded"}
    assert not repro.bounded([0, 2, 4])["ok"]
    assert not repro.bounded([])["ok"]


@pytest.mark.torch
def test_the_counter_sees_a_retained_graph_and_its_release() -> None:
    import torch

    repro = load(ENTRY)
    counter = repro.SavedCounter()
    x = torch.ones(3, requires_grad=True)
    with counter.track():
        y = torch.tanh(x).sum()
    y.backward(retain_graph=True)
    assert counter.alive() > 0  # the retained graph holds its saved tensors
    del y
    assert counter.alive() == 0


@pytest.mark.torch
def test_no_grad_second_pass_raises_its_own_error() -> None:
    repro = load(ENTRY)
    with pytest.raises(RuntimeError, match="does not require grad"):
        repro.VARIANTS["deadend3-no-grad-second-pass"]("cpu", "fp32")
