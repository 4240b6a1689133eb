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


@pytest.mark.torch
def test_amp_autocast_error(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load("deadends/pytorch/amp-autocast-error/*")
    assert failed(m.deadend1_no_amp("cpu", "bf16")) == {"mixed_precision_in_effect"}
    monkeypatch.setattr(m, "LR", 0.0)  # a step that moves nothing does not train
    assert failed(m.control_float32_step("cpu", "bf16")) == {"trained"}


@pytest.mark.torch
def test_custom_dataset_error() -> None:
    m = load("deadends/pytorch/custom-dataset-error/*")
    # a sampler that reaches 4 of the 12 samples: one batch, most samples never trained
    assert failed(m.train("cpu", m.records("tensors"), sampler=[0, 1, 2, 3])) == {
        "batches_are_tensors_of_the_right_shape",
        "every_sample_trained",
    }
    assert failed(m.workaround2_full_interface("cpu", "fp32")) == set()


@pytest.mark.torch
def test_dataloader_bad_file_descriptor() -> None:
    m = load("deadends/pytorch/dataloader-bad-file-descriptor/*")
    # a record read at another worker's offset comes twice, another not at all
    want = list(range(1000, 1000 + m.N))
    assert m.every_record_once([want, want])["ok"]
    assert not m.every_record_once([want, [1000, *want[:-1]]])["ok"]
    assert failed(m.deadend1_num_workers_0("cpu", "fp32")) == {"read_by_worker_processes"}
    assert failed(m.control_in_memory("cpu", "fp32")) == set()


@pytest.mark.torch
def test_ddp_init_error() -> None:
    m = load("deadends/pytorch/ddp-init-error/*")
    assert m.checks(0.5, [0.1, 0.2], "gloo")["trained"]["ok"]
    assert not m.checks(float("nan"), [0.1, 0.2], "gloo")["trained"]["ok"]
    assert not m.checks(0.5, [0.1, 0.0], "gloo")["trained"]["ok"]


@pytest.mark.torch
def test_dtype_mismatch() -> None:
    m = load("deadends/pytorch/dtype-mismatch/*")

    def cast(model, x, x32):
        return model, x.float()

    def frozen(model, x, x32):
        model.weight.requires_grad_(False)
        return model, x.float()

    assert failed(m.forward_backward("cpu", "bf16", cast, tol=0.0)) == {"output_matches_float32"}
    assert failed(m.forward_backward("cpu", "bf16", frozen)) == {"weight_grad"}
    assert failed(m.deadend1_float64("cpu", "bf16")) == {"params_at_most_float32"}


@pytest.mark.torch
def test_inplace_operation_gradient() -> None:
    m = load("deadends/pytorch/inplace-operation-gradient/*")
    # h + 1 against a reference without the + 1: the last layer's gradient differs
    assert "grad_correct_second.weight" in failed(m.compare("cpu", "fp32", m.add_one))
    assert failed(m.deadend2_data("cpu", "fp32")) == {"grad_correct_first.weight"}


@pytest.mark.torch
def test_lr_scheduler_error(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load("deadends/pytorch/lr-scheduler-error/*")
    assert failed(m.one_cycle("cpu", 2)) == {"one_cycle"}  # warm-up only: no cycle
    monkeypatch.setattr(m, "GAMMA", 1.0)  # nothing decays: the early step shifts nothing
    assert failed(m.workaround2_get_last_lr_check("cpu", "fp32")) == {"detects_wrong_lr"}


@pytest.mark.torch
def test_onnx_export_error() -> None:
    m = load("deadends/pytorch/onnx-export-error/*")
    assert m.is_onnx(b"\x08\x07 ... Einsum ...", ["Einsum"])["ok"]
    assert not m.is_onnx(b"\x08\x07 ... Gemm ...", ["Einsum"])["ok"]  # the operator missing
    assert not m.is_onnx(b"PK\x03\x04 Einsum", ["Einsum"])["ok"]  # not an ONNX ModelProto


@pytest.mark.torch
def test_quantization_error() -> None:
    m = load("deadends/pytorch/quantization-error/*")

    def fx_narrow(model, q, engine, data):
        return m.fx_quantize(model, q, engine, data["narrow"], data["evaluation"][:1])

    assert failed(m.against_float(fx_narrow)) == {"close_to_float"}
    as_float = m.against_float(lambda model, q, engine, data: model)
    assert failed(as_float) == {"quantized_modules", "activations_quantized"}
    assert failed(m.deadend2_dynamic_quantization("cpu", "fp32")) == {"activations_quantized"}


@pytest.mark.torch
def test_runtime_error_inplace() -> None:
    m = load("deadends/pytorch/runtime-error-inplace/*")
    # w unchanged where w + 1 is meant: the loss is not the one meant
    assert "loss_value" in failed(m.backward_through("cpu", lambda w: w, "add"))
    assert failed(m.control_no_inplace("cpu", "fp32")) == set()


@pytest.mark.torch
def test_gradient_clipping_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("lightning")
    m = load("lightning/gradient-clipping-optimizer-handles-unscaling")
    assert failed(m.example_fix_helpers("cpu", "fp16")) == set()
    # a helper that says no where clip_gradients works (the plain AdamW)
    monkeypatch.setattr(m, "can_clip_gradients", lambda plugin, optimizer: False)
    assert failed(m.example_fix_helpers("cpu", "fp16")) == {"helpers_right_on_plain_optimizer"}


@pytest.mark.torch
def test_compile_error() -> None:
    m = load("deadends/pytorch/compile-error/*")
    import torch

    def nan_backend(gm, example_inputs):
        def run(*args):
            return [out * float("nan") for out in gm(*args)]

        return run

    torch._dynamo.reset()
    got = m.compile_and_step("cpu", net="plain", backend=nan_backend)
    assert failed(got) == {"matches_eager", "gradients"}


@pytest.mark.torch
def test_checkpoint_device_mismatch() -> None:
    m = load("deadends/cuda/checkpoint-device-mismatch/*")
    import torch

    if torch.cuda.is_available():
        pytest.skip("the entry is about a machine without CUDA")

    def zeros(path):
        return {k: torch.zeros_like(v) for k, v in torch.load(path).items()}

    assert failed(m.checkpoint("fp32", zeros, save=torch.save)) == {"saved_weights_restored"}
    assert failed(m.control_cpu_checkpoint("cpu", "fp32")) == set()


@pytest.mark.torch
def test_key_check_flags_the_faulty_checkpoint_and_passes_a_good_one() -> None:
    """state-dict-key-mismatch workaround 3 (literal) is a check, judged by detection: each
    of its postconditions fails where the check would be wrong."""
    m = load("deadends/pytorch/state-dict-key-mismatch/*")
    assert failed(m.key_check("cpu")) == set()
    # a good checkpoint passed off as the faulty one: nothing to flag
    assert failed(m.key_check("cpu", faulty="plain")) == {"flags_the_faulty_checkpoint"}
    # the faulty checkpoint passed off as the good one: the check must not pass it
    assert failed(m.key_check("cpu", good="wrapped")) == {"passes_a_good_checkpoint"}


@pytest.mark.torch
def test_shape_check_flags_the_faulty_shapes_and_passes_good_ones() -> None:
    """broadcast-shape-mismatch workaround 2 (literal) is a check, judged by detection."""
    m = load("deadends/pytorch/broadcast-shape-mismatch/*")
    assert failed(m.shape_check()) == set()
    assert failed(m.shape_check(faulty=(2, 1))) == {"flags_the_faulty_shapes"}
    assert failed(m.shape_check(good=(2,))) == {"passes_good_shapes"}


@pytest.mark.torch
def test_no_code_ran_fails_where_the_payload_runs_and_holds_where_the_load_refuses_it(
    tmp_path,
) -> None:
    """reprokit's security measurement (checkpoint-loading-error dead end 2's security risk):
    the payload's marker appears when the full unpickler loads the file, not when
    torch.load's weights_only refuses it."""
    import torch

    load("deadends/pytorch/checkpoint-loading-error/*")  # puts repros/ on sys.path
    from reprokit import no_code_ran, payload

    carrier, marker = payload(str(tmp_path))
    path = tmp_path / "file.pt"
    torch.save({"weights": torch.zeros(2), "meta": carrier}, path)
    with pytest.raises(Exception, match="(?i)weights only load failed|unsupported global"):
        torch.load(path, weights_only=True)
    assert no_code_ran(marker, "weights_only=True")["ok"] is True
    torch.load(path, weights_only=False)
    assert no_code_ran(marker, "weights_only=False") == {
        "ok": False,
        "detail": "weights_only=False: the payload ran (code from the file executed)",
    }
