"""Reproducer: "RuntimeError: ONNX export failed for model"
(deadends.dev pytorch/onnx-export-error/pt2-linux).

torch.onnx.export of a small model that uses torch.einsum (an operator the exporter
supports from ONNX opset 12) with opset_version=11. Variants that must finish an export
first check that this torch can export at all (a one-layer model at opset 12): torch 2.x
needs the `onnx` package for that, and without it they are unsupported with the
exporter's own message. The baseline needs only the default exporter to be importable
(where torch.onnx.export defaults to dynamo=True, that needs onnxscript): its error comes
before the exporter needs `onnx`.
"""

from __future__ import annotations

import importlib.util
import inspect
import io

import torch
from reprokit import Unsupported
from torch import nn


class WithEinsum(nn.Module):
    def __init__(self, use_einsum: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 2)
        self.use_einsum = use_einsum

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x)
        if self.use_einsum:
            out = out + torch.einsum("bi,bi->b", x, x).unsqueeze(1)  # squared norm per row
        return out


def export(model: nn.Module, x: torch.Tensor, opset: int, **kwargs) -> bytes:
    buffer = io.BytesIO()
    torch.onnx.export(model, (x,), buffer, opset_version=opset, input_names=["x"], **kwargs)
    return buffer.getvalue()


def require_default_exporter() -> None:
    """The exporter torch.onnx.export uses by default must be importable: from the release
    where its `dynamo` argument defaults to True, that is the dynamo exporter, which needs
    the onnxscript package before it converts anything."""
    if not hasattr(torch, "onnx") or not hasattr(torch.onnx, "export"):
        raise Unsupported("torch.onnx.export does not exist in torch %s" % torch.__version__)
    dynamo = inspect.signature(torch.onnx.export).parameters.get("dynamo")
    if dynamo is not None and dynamo.default is True:
        missing = [m for m in ("onnxscript", "onnx") if importlib.util.find_spec(m) is None]
        if missing:
            raise Unsupported(
                "torch.onnx.export defaults to the dynamo exporter in torch %s (dynamo=True), "
                "which needs %s: not installed" % (torch.__version__, " and ".join(missing))
            )


def require_exporter(x: torch.Tensor) -> None:
    if not hasattr(torch, "onnx") or not hasattr(torch.onnx, "export"):
        raise Unsupported("torch.onnx.export does not exist in torch %s" % torch.__version__)
    try:
        export(nn.Linear(4, 2), x, 12)
    except Exception as exc:
        raise Unsupported(
            "torch.onnx.export cannot export a single nn.Linear at opset 12 here: %s: %s"
            % (type(exc).__name__, str(exc)[:300])
        )


def is_onnx(blob: bytes, ops) -> dict:
    # an ONNX ModelProto starts with field 1 (ir_version, a varint): byte 0x08
    found = [op for op in ops if op.encode() in blob]
    return {
        "ok": blob[:1] == b"\x08" and len(found) == len(ops),
        "detail": "%d bytes, first byte %r, operators found %s of %s"
        % (len(blob), blob[:1], found, list(ops)),
    }


def prepared(device, can_export=True):
    """The input, the einsum model, and the exporter checks (``can_export``: that this torch
    can finish an export at all)."""
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device)
    model = WithEinsum().to(device)
    require_default_exporter()
    if can_export:
        require_exporter(x)
    return x, model


def baseline_einsum_opset11(device, precision):
    x, model = prepared(device, can_export=False)
    return {"exported": is_onnx(export(model, x, 11), ["Einsum"])}


def workaround1_opset17(device, precision):
    x, model = prepared(device)
    return {"exported": is_onnx(export(model, x, 17), ["Einsum"])}


def workaround1_opset12(device, precision):
    x, model = prepared(device)
    return {"exported": is_onnx(export(model, x, 12), ["Einsum"])}


def workaround2_dynamic_axes_on_failing_export(device, precision):
    x, model = prepared(device, can_export=False)
    return {"exported": is_onnx(export(model, x, 11, dynamic_axes={"x": {0: "batch"}}), ["Einsum"])}


def workaround2_dynamic_axes_batch(device, precision):
    x, model = prepared(device)
    blob = export(model, x, 12, dynamic_axes={"x": {0: "batch"}})
    return {
        "exported": is_onnx(blob, ["Einsum"]),
        "batch_is_symbolic": {
            "ok": b"batch" in blob,
            "detail": "dim_param 'batch' in the model: %s" % (b"batch" in blob),
        },
    }


def deadend2_remove_the_operator(device, precision):
    x, model = prepared(device)
    reduced = WithEinsum(use_einsum=False).to(device)
    blob = export(reduced, x, 11)
    diff = (reduced(x) - model(x)).abs().max().item()
    return {
        "exported": is_onnx(blob, ["Gemm"]),
        "same_as_original": {"ok": diff < 1e-6, "detail": "max |reduced - original| %s" % diff},
    }


def control_no_einsum_opset11(device, precision):
    x, model = prepared(device)
    return {"exported": is_onnx(export(WithEinsum(use_einsum=False).to(device), x, 11), ["Gemm"])}


VARIANTS = {
    "baseline-einsum-opset11": baseline_einsum_opset11,
    "workaround1-opset17": workaround1_opset17,
    "workaround1-opset12": workaround1_opset12,
    "workaround2-dynamic-axes-on-failing-export": workaround2_dynamic_axes_on_failing_export,
    "workaround2-dynamic-axes-batch": workaround2_dynamic_axes_batch,
    "deadend2-remove-the-operator": deadend2_remove_the_operator,
    "control-no-einsum-opset11": control_no_einsum_opset11,
}
