"""deadends/cuda/device-side-assert/cuda12-a100: each postcondition shown able to fail on
the real torch of the test interpreter, the CUDA variants' preconditions and training script
exercised on the CPU (the GPU window is not spent on a typo)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/device-side-assert/cuda12-a100"
CUDA_ONLY = [
    "baseline-label-out-of-range-cuda",
    "workaround1-launch-blocking",
    "deadend1-launch-blocking-0",
    "deadend2-more-gpu-memory",
]

pytestmark = pytest.mark.torch


def batch_with(repro, how):
    """The reproducer's batch with its good batch's input replaced by ``how(x)``."""
    original = repro.batch

    def changed(device, bad):
        x, y = original(device, bad)
        return (x if bad else how(x)), y

    return changed


def test_the_cpu_twin_raises_index_error():
    repro = load(ENTRY)
    with pytest.raises(IndexError, match=r"Target \d+ is out of bounds"):
        repro.baseline_label_out_of_range_cpu("cpu", "fp32")


def test_control_and_sensible_workaround_train():
    repro = load(ENTRY)
    assert failed(repro.control_labels_in_range("cpu", "fp32")) == set()
    assert failed(repro.workaround2_check_shapes_sensible("cpu", "fp32")) == set()


def test_loss_finite_fails_on_a_nan_batch(monkeypatch):
    repro = load(ENTRY)
    monkeypatch.setattr(repro, "batch", batch_with(repro, lambda x: x * float("nan")))
    assert "loss_finite" in failed(repro.control_labels_in_range("cpu", "fp32"))


def test_params_moved_fails_on_an_all_zero_batch(monkeypatch):
    repro = load(ENTRY)
    monkeypatch.setattr(repro, "batch", batch_with(repro, lambda x: x * 0))
    checks = repro.control_labels_in_range("cpu", "fp32")
    assert failed(checks) == {"params_moved"}  # the weight gets no gradient, the bias does
    assert "weight" in checks["params_moved"]["detail"]


def test_bad_label_named_fails_for_a_check_that_does_not_name_it(monkeypatch):
    repro = load(ENTRY)

    def vague(logits, labels, num_classes):
        raise AssertionError("labels out of range")

    monkeypatch.setattr(repro, "check_shapes_and_labels", vague)
    assert failed(repro.workaround2_check_shapes_literal("cpu", "fp32")) == {"bad_label_named"}


def test_device_usable_after_fails_when_the_next_step_is_nan(monkeypatch):
    repro = load(ENTRY)
    monkeypatch.setattr(repro, "batch", batch_with(repro, lambda x: x * float("nan")))
    assert failed(repro.workaround2_check_shapes_literal("cpu", "fp32")) == {"device_usable_after"}


def test_the_training_script_runs_and_its_checks_can_fail():
    repro = load(ENTRY)
    bad = repro.train_script("cpu", "bad", CUDA_LAUNCH_BLOCKING="1")
    good = repro.train_script("cpu", "good")
    assert bad["stage"] == "loss" and "out of bounds" in bad["error"]
    assert good["error"] is None and good["loss"] > 0
    assert failed(repro.at_faulty_op(bad)) == set()
    assert failed(repro.at_faulty_op(good)) == {"error_at_faulty_op"}  # nothing was raised
    assert repro.train_script("cpu", "bad", CUDA_LAUNCH_BLOCKING="0")["stage"] == "loss"


@pytest.mark.parametrize("name", CUDA_ONLY)
def test_cuda_variants_are_unsupported_on_the_cpu(name):
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs a CUDA device"):
        repro.VARIANTS[name]("cpu", "fp32")
