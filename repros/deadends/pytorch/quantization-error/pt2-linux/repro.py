"""Reproducer: "RuntimeError: quantization failed for module"
(deadends.dev pytorch/quantization-error/pt2-linux).

Post-training static quantization (int8, CPU) of a small MLP. The baseline uses eager
mode without QuantStub/DeQuantStub, so the converted model's quantized Linear receives a
float tensor. Every variant that produces a model must agree with the float model within
a tolerance (10% of the float output's range) on held-out data.

    python repro.py --list
    python repro.py --variant baseline-eager-no-stubs --device cpu --precision fp32
"""

from __future__ import annotations

import copy
import inspect
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
    "baseline-eager-no-stubs": "eager prepare -> calibrate -> convert of an MLP without QuantStub/DeQuantStub, run on float input",
    "workaround1-fx-prepare-calibrate-convert": "quantize_fx.prepare_fx -> calibrate -> convert_fx",
    "workaround2-representative-calibration-fx": "the FX path calibrated with data drawn like the evaluation data",
    "workaround2-representative-calibration-eager": "the baseline (eager, no stubs) calibrated with data drawn like the evaluation data",
    "deadend1-skip-first-layer": "the baseline with qconfig None on the first Linear (the layer that receives the float input)",
    "deadend2-dynamic-quantization": "torch quantize_dynamic of every nn.Linear (int8 weights)",
    "control-eager-with-stubs": "eager static quantization with QuantStub/DeQuantStub around the MLP",
}
NOT_WRITTEN: list[str] = []
TOLERANCE = 0.10  # of the float output's range


class MLP(nn.Module):
    def __init__(self, stubs: bool, q) -> None:
        super().__init__()
        self.quant = q.QuantStub() if stubs else nn.Identity()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)
        self.dequant = q.DeQuantStub() if stubs else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dequant(self.fc2(self.relu(self.fc1(self.quant(x)))))


def quantization_api():
    """(the quantization namespace, the engine in use), or Unsupported."""
    ao = getattr(getattr(torch, "ao", None), "quantization", None)
    q = (
        ao
        if ao is not None and hasattr(ao, "get_default_qconfig")
        else getattr(torch, "quantization", None)
    )
    if q is None or not hasattr(q, "get_default_qconfig"):
        raise Unsupported(
            "neither torch.ao.quantization nor torch.quantization offers get_default_qconfig in torch %s"
            % torch.__version__
        )
    engines = list(torch.backends.quantized.supported_engines)
    engine = next((e for e in ("fbgemm", "x86", "qnnpack") if e in engines), None)
    if engine is None:
        raise Unsupported(
            "no quantized CPU engine in torch %s (supported: %s)" % (torch.__version__, engines)
        )
    torch.backends.quantized.engine = engine
    return q, engine


def fx_quantize(model: nn.Module, q, engine: str, calibration: torch.Tensor, example: torch.Tensor):
    try:
        from torch.ao.quantization import quantize_fx
    except ImportError:
        try:
            from torch.quantization import quantize_fx
        except ImportError as exc:
            raise Unsupported("quantize_fx is missing in torch %s: %s" % (torch.__version__, exc))
    qconfig = q.get_default_qconfig(engine)
    params = inspect.signature(quantize_fx.prepare_fx).parameters
    if "example_inputs" in params:
        mapping = (
            q.QConfigMapping().set_global(qconfig)
            if hasattr(q, "QConfigMapping")
            else {"": qconfig}
        )
        prepared = quantize_fx.prepare_fx(model, mapping, example_inputs=(example,))
    else:  # torch <= 1.12: a qconfig_dict, no example inputs
        prepared = quantize_fx.prepare_fx(model, {"": qconfig})
    prepared(calibration)
    return quantize_fx.convert_fx(prepared)


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cpu":
        raise Unsupported(
            "int8 static quantization runs on CPU engines only (asked for %s)" % device
        )
    q, engine = quantization_api()
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    representative = torch.randn(256, 8, generator=g)
    narrow = 0.01 * torch.randn(256, 8, generator=g)  # what a careless calibration set looks like
    evaluation = torch.randn(64, 8, generator=g)

    float_model = MLP(stubs=variant == "control-eager-with-stubs", q=q).eval()
    want = float_model(evaluation).detach()
    model = copy.deepcopy(float_model)

    if variant.startswith("workaround1") or variant == "workaround2-representative-calibration-fx":
        calibration = representative
        quantized = fx_quantize(model, q, engine, calibration, evaluation[:1])
    elif variant == "deadend2-dynamic-quantization":
        quantized = q.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    else:
        model.qconfig = q.get_default_qconfig(engine)
        if variant == "deadend1-skip-first-layer":
            model.fc1.qconfig = None
        q.prepare(model, inplace=True)
        # the baseline calibrates carelessly; workaround 2's eager reading calibrates representatively
        model(
            representative
            if variant
            in ("workaround2-representative-calibration-eager", "control-eager-with-stubs")
            else narrow
        )
        quantized = q.convert(model, inplace=False)
    got = quantized(evaluation)
    span = (want.max() - want.min()).item()
    error = (got - want).abs().max().item()
    kinds = sorted(
        {
            type(m).__module__ + "." + type(m).__name__
            for m in quantized.modules()
            if "quantized" in type(m).__module__
        }
    )
    return {
        "close_to_float": {
            "ok": error <= TOLERANCE * span,
            "detail": "max |quantized - float| %.4f, float output range %.4f, tolerance %.0f%% of it; engine %s"
            % (error, span, 100 * TOLERANCE, engine),
        },
        "quantized_modules": {"ok": bool(kinds), "detail": "quantized module types: %s" % kinds},
    }


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
