"""Reproducer: "RuntimeError: quantization failed for module"
(deadends.dev pytorch/quantization-error/pt2-linux).

Post-training static quantization (int8, CPU) of a small MLP. The baseline uses eager
mode without QuantStub/DeQuantStub, so the converted model's quantized Linear receives a
float tensor. Every variant that produces a model must agree with the float model within
a tolerance (10% of the float output's range) on held-out data. int8 static quantization
runs on CPU engines only (entry.yaml: cpu).
"""

from __future__ import annotations

import copy
import inspect

import torch
from reprokit import Unsupported
from torch import nn

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


def against_float(quantize, stubs=False) -> dict:
    """``quantize(model, q, engine, data)`` of a copy of the float MLP (with QuantStub and
    DeQuantStub where ``stubs``), against the float model on held-out data; ``data`` holds the
    "representative" and "narrow" calibration sets and the "evaluation" set."""
    q, engine = quantization_api()
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    data = {"representative": torch.randn(256, 8, generator=g)}
    data["narrow"] = 0.01 * torch.randn(256, 8, generator=g)  # a careless calibration set
    data["evaluation"] = evaluation = torch.randn(64, 8, generator=g)
    float_model = MLP(stubs=stubs, q=q).eval()
    want = float_model(evaluation).detach()
    quantized = quantize(copy.deepcopy(float_model), q, engine, data)
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
        # static quantization runs the activations in int8 too; dynamic quantization
        # quantizes the weights only and computes on float activations
        "activations_quantized": {
            "ok": bool(kinds) and not any(".dynamic." in k for k in kinds),
            "detail": "dynamic (weight-only) modules: %s" % [k for k in kinds if ".dynamic." in k],
        },
    }


def eager(calibration, skip_first=False):
    """Eager prepare -> calibrate on data[calibration] -> convert (the first Linear left
    float where ``skip_first``)."""

    def quantize(model, q, engine, data):
        model.qconfig = q.get_default_qconfig(engine)
        if skip_first:
            model.fc1.qconfig = None
        q.prepare(model, inplace=True)
        model(data[calibration])
        return q.convert(model, inplace=False)

    return quantize


def fx_representative(model, q, engine, data):
    return fx_quantize(model, q, engine, data["representative"], data["evaluation"][:1])


def baseline_eager_no_stubs(device, precision):
    return against_float(eager("narrow"))  # the baseline calibrates carelessly


def workaround1_fx_prepare_calibrate_convert(device, precision):
    return against_float(fx_representative)


def workaround2_representative_calibration_fx(device, precision):
    return against_float(fx_representative)


def workaround2_representative_calibration_eager(device, precision):
    return against_float(eager("representative"))


def deadend1_skip_first_layer(device, precision):
    return against_float(eager("narrow", skip_first=True))


def deadend2_dynamic_quantization(device, precision):
    def dynamic(model, q, engine, data):
        return q.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)

    return against_float(dynamic)


def control_eager_with_stubs(device, precision):
    return against_float(eager("representative"), stubs=True)


VARIANTS = {
    "baseline-eager-no-stubs": baseline_eager_no_stubs,
    "workaround1-fx-prepare-calibrate-convert": workaround1_fx_prepare_calibrate_convert,
    "workaround2-representative-calibration-fx": workaround2_representative_calibration_fx,
    "workaround2-representative-calibration-eager": workaround2_representative_calibration_eager,
    "deadend1-skip-first-layer": deadend1_skip_first_layer,
    "deadend2-dynamic-quantization": deadend2_dynamic_quantization,
    "control-eager-with-stubs": control_eager_with_stubs,
}
