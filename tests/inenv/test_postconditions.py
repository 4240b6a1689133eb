"""Every postcondition of the reviewed reproducers shown able to fail, on the real torch of
the test interpreter (torch 2.13.0): each test calls the reproducer's own functions with the
input or the code that breaks what the postcondition checks. Where a record already shows a
postcondition failing (a dead end's documented failure), it is not repeated here; where no
record can (the postcondition holds in every variant by design), the test is the evidence
`check --smells` points to (entry.yaml smells: never-fails)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.paths import REPO

DEADENDS = REPO / "repros" / "deadends" / "pytorch"


def load(entry: str) -> ModuleType:
    """repros/<entry>/repro.py as a module registered in sys.modules (its classes pickle)."""
    pytest.importorskip("torch", reason="needs torch in the test interpreter (nox -s tests)")
    if str(REPO / "repros") not in sys.path:
        sys.path.insert(0, str(REPO / "repros"))
    name = "repro_" + entry.replace("/", "_").replace("-", "_").replace(".", "_")
    path = next((REPO / "repros").glob(entry + "/repro.py"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def failed(checks: dict) -> set[str]:
    return {name for name, check in checks.items() if not check["ok"]}


@pytest.mark.torch
def test_hook_error() -> None:
    m = load("deadends/pytorch/hook-error/*")
    import torch

    # a hook that passes zeros on: the layer before the hooked activation never learns
    def zeros(norms, hidden):
        def hook(grad):
            norms.append(grad.float().norm().item())
            return torch.zeros_like(grad)

        return hook

    assert failed(m.monitor("cpu", "fp32", zeros)) == {"weights_trained"}
    # the guard around a hook that does nothing wrong catches nothing
    assert failed(m.checked("cpu", "fp32", m.recording_hook)) == {"guard_caught_the_faulty_hook"}
    assert failed(m.workaround1_checked_hook("cpu", "fp32")) == set()
    assert "gradient_norm_monitored" in failed(m.deadend1_remove_hooks("cpu", "fp32"))


@pytest.mark.torch
def test_autograd_no_grad_fn() -> None:
    m = load("deadends/pytorch/autograd-no-grad-fn/*")
    # the check on a loss that has its graph detects nothing
    assert failed(m.train("cpu", "fp32", check_graph=True)) == {"missing_graph_detected"}
    assert failed(m.workaround2_literal_check_graph("cpu", "fp32")) == set()
    assert failed(m.deadend1_loss_requires_grad("cpu", "fp32")) == {
        "params_updated",
        "loss_decreased",
    }


@pytest.mark.torch
def test_checkpoint_loading_error() -> None:
    m = load("deadends/pytorch/checkpoint-loading-error/*")
    assert failed(m.deadend1_strict_false("cpu", "fp32")) == {"saved_weights_restored"}
    with pytest.raises(AttributeError, match="Can't get attribute 'Net'"):
        m.deadend2_pickle_model_weights_only_false("cpu", "fp32")


@pytest.mark.torch
def test_tensor_size_mismatch() -> None:
    m = load("deadends/pytorch/tensor-size-mismatch/*")
    _, _, small, _ = m.inputs("cpu")
    # an input the model fits: nothing fails, so no layer is named
    assert failed(m.print_shapes("cpu", small)) == {"names_the_layer"}
    assert not m.shape_check((2, 1, 10), (2, 10), "model output")["ok"]
    a, b, full = m.true_features("cpu")
    import torch

    assert not m.same_as_per_sample(torch.cat([a, b.repeat(2, 1)], dim=1), a, full)["ok"]
    assert m.same_as_per_sample(torch.cat([a, full], dim=1), a, full)["ok"]
    assert failed(m.deadend1_unsqueeze_squeeze_search("cpu", "fp32")) == {"cat_runs"}
    assert failed(m.deadend1_reshape_until_it_runs("cpu", "fp32")) == {"same_as_per_sample"}
    assert failed(m.deadend2_transpose_until_it_runs("cpu", "fp32")) == {"same_as_per_sample"}


@pytest.mark.torch
def test_module_not_registered() -> None:
    m = load("deadends/pytorch/module-not-registered/*")
    every = {"all_layers_registered", "all_layers_trained", "all_layers_follow_model_to"}
    # on the CPU too: the unregistered layers do not follow model.to(torch.float64)
    assert failed(m.baseline_plain_list("cpu", "fp32")) == every
    # registered by hand in __init__: the layer added later is missed
    assert failed(m.deadend1_register_manually("cpu", "fp32")) == every
    assert failed(m.control_attributes("cpu", "fp32")) == set()


@pytest.mark.torch
def test_embedding_index_error() -> None:
    m = load("deadends/pytorch/embedding-index-error/*")
    assert failed(m.deadend1_bigger_table("cpu", "fp32")) == {"table_fits_vocabulary"}
    assert "shape" in failed(m.look_up("cpu", "fp32", tokens=[[1, 2]]))
    # every id is the padding id: no gradient reaches the table
    padding = m.look_up("cpu", "fp32", tokens=[[0, 0, 0], [0, 0, 0]], padding_idx=0)
    assert failed(padding) == {"gradient_reaches_table"}


@pytest.mark.torch
def test_optimizer_state_error() -> None:
    m = load("deadends/pytorch/optimizer-state-error/*")
    # the same architecture: nothing to detect
    assert failed(m.verify_then_load("cpu", "base")) == {"mismatch_detected"}
    # an optimizer that does not move the weights does not train
    assert failed(m.verify_then_load("cpu", "extra", lr=0.0)) == {"trains_after"}
    # the refactored model: the load raises nothing, the moments land on the wrong layers
    assert failed(m.deadend2_ignore_load_error("cpu", "fp32")) == {"continues_like_uninterrupted"}
    assert failed(m.workaround1_save_together("cpu", "fp32")) == set()
