"""deadends/huggingface/onnx-export-error/hf4-linux: the baseline's error and each
postcondition shown able to fail, on the test interpreter's real torch, transformers and
onnx (the test extras install them)."""

from __future__ import annotations

import io

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/huggingface/onnx-export-error/hf4-linux"
# the tracer warns of every Python bool it sees (TracerWarning) and torch of its exporter's
# deprecation: warnings here, as in the harness's child, not errors
pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def entry():
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    pytest.importorskip("onnx", reason="needs onnx in the test interpreter")
    return load(ENTRY)


@pytest.mark.torch
def test_the_baseline_is_refused_by_the_exporter() -> None:
    import torch

    m = entry()
    with pytest.raises(
        torch.onnx.errors.OnnxExporterError, match="opset version 11 is not supported"
    ):
        m.baseline("cpu", "fp32")


@pytest.mark.torch
def test_the_sensible_reading_exports_a_model_that_runs() -> None:
    m = entry()
    checks = m.workaround2_opset_for_architecture("cpu", "fp32")
    assert failed(checks) == set()
    assert "opset 14" in checks["onnx_model_valid"]["detail"]


@pytest.mark.torch
def test_matches_torch_fails_on_other_weights() -> None:
    m = entry()
    model = m.bert("eager")
    data = m.export(model, m.TUTORIAL_OPSET)
    assert failed(m.checked(data, model)) == set()
    model.pooler.dense.weight.data.add_(1.0)  # not on the path to the hidden state
    assert failed(m.checked(data, model)) == set()
    # not a constant added: the LayerNorm after it would take a per-token shift away
    weight = model.encoder.layer[0].output.dense.weight.data
    weight.copy_(weight.flip(0))
    assert failed(m.checked(data, model)) == {"matches_torch", "matches_torch_other_batch"}


@pytest.mark.torch
def test_a_fixed_batch_fails_batch_axis_dynamic_and_the_other_batch() -> None:
    m = entry()
    model = m.bert("eager")
    fixed = m.checked(m.export(model, m.TUTORIAL_OPSET, dynamic=False), model)
    assert failed(fixed) == {"batch_axis_dynamic", "matches_torch_other_batch"}
    assert "fixed at 2" in fixed["batch_axis_dynamic"]["detail"]


@pytest.mark.torch
def test_onnx_model_valid_fails_on_a_pickle_and_on_a_truncated_file() -> None:
    import torch

    m = entry()
    model = m.bert("eager")
    buffer = io.BytesIO()
    torch.save(model, buffer)
    assert failed(m.checked(buffer.getvalue(), model)) == {"onnx_model_valid"}
    data = m.export(model, m.TUTORIAL_OPSET)
    assert failed(m.checked(data[: len(data) // 2], model)) == {"onnx_model_valid"}


@pytest.mark.torch
def test_opset_as_asked_fails_on_a_file_of_another_opset() -> None:
    """What the default exporter of torch 2.9 on does with an opset-11 call (the file says
    18; its records show it), made here with the TorchScript exporter at 14: the test
    interpreter has no onnxscript, which the dynamo exporter needs."""
    m = entry()
    model = m.bert("eager")
    at_14 = m.export(model, 14)
    assert not m.opset_as_asked(at_14, 11)["ok"]
    assert m.opset_as_asked(at_14, 11)["detail"] == "asked opset 11, the file is written at 14"
    assert m.opset_as_asked(m.export(model, 11), 11)["ok"]
    assert not m.opset_as_asked(b"not onnx", 11)["ok"]
