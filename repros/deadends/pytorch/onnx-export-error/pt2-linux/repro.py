"""Reproducer: "RuntimeError: ONNX export failed for model"
(deadends.dev pytorch/onnx-export-error/pt2-linux).

torch.onnx.export of a small model that uses torch.einsum (an operator the exporter
supports from ONNX opset 12) with opset_version=11. Variants that must finish an export
first check that this torch can export at all (a one-layer model at opset 12): torch 2.x
needs the `onnx` package for that, and without it they are unsupported with the
exporter's own message. The baseline needs only the default exporter to be importable
(where torch.onnx.export defaults to dynamo=True, that needs onnxscript): its error comes
before the exporter needs `onnx`.

    python repro.py --list
    python repro.py --variant baseline-einsum-opset11 --device cpu --precision fp32
"""

from __future__ import annotations

import importlib.util
import inspect
import io
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
    "baseline-einsum-opset11": "export a model using torch.einsum with opset_version=11",
    "workaround1-opset17": "the same export with opset_version=17, as the entry says",
    "workaround1-opset12": "the same export with the opset the exporter names (12)",
    "workaround2-dynamic-axes-on-failing-export": "the failing export (opset 11) with dynamic_axes for the batch dimension",
    "workaround2-dynamic-axes-batch": "an export at opset 12 with dynamic_axes={'x': {0: 'batch'}}: the batch dimension must be symbolic",
    "deadend2-remove-the-operator": "the einsum term removed so that opset 11 exports; outputs compared with the original model",
    "control-no-einsum-opset11": "a model without einsum exported at opset 11",
}
NOT_WRITTEN: list[str] = []


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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(device)
    model = WithEinsum().to(device)
    require_default_exporter()
    if variant == "baseline-einsum-opset11":
        return {"exported": is_onnx(export(model, x, 11), ["Einsum"])}
    if variant == "workaround2-dynamic-axes-on-failing-export":
        return {
            "exported": is_onnx(export(model, x, 11, dynamic_axes={"x": {0: "batch"}}), ["Einsum"])
        }
    require_exporter(x)
    if variant in ("workaround1-opset17", "workaround1-opset12"):
        return {
            "exported": is_onnx(export(model, x, 17 if variant.endswith("17") else 12), ["Einsum"])
        }
    if variant == "workaround2-dynamic-axes-batch":
        blob = export(model, x, 12, dynamic_axes={"x": {0: "batch"}})
        return {
            "exported": is_onnx(blob, ["Einsum"]),
            "batch_is_symbolic": {
                "ok": b"batch" in blob,
                "detail": "dim_param 'batch' in the model: %s" % (b"batch" in blob),
            },
        }
    if variant == "deadend2-remove-the-operator":
        reduced = WithEinsum(use_einsum=False).to(device)
        blob = export(reduced, x, 11)
        diff = (reduced(x) - model(x)).abs().max().item()
        return {
            "exported": is_onnx(blob, ["Gemm"]),
            "same_as_original": {"ok": diff < 1e-6, "detail": "max |reduced - original| %s" % diff},
        }
    return {"exported": is_onnx(export(WithEinsum(use_einsum=False).to(device), x, 11), ["Gemm"])}


if __name__ == "__main__":
    sys.exit(
        main(
            run,
            VARIANTS,
            __doc__,
            sys.argv[1:],
            not_written=NOT_WRITTEN,
            fixed_precision={v: "fp32" for v in VARIANTS},
        )
    )
