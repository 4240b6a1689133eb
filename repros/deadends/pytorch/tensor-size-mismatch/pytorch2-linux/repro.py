"""Reproducer: "Sizes of tensors must match except in dimension 1. Expected 64 but got 32"
(deadends.dev pytorch/tensor-size-mismatch/pytorch2-linux).

Two situations the entry covers: torch.cat along dim 1 of two feature blocks whose batch
sizes differ (64 and 32, the documented numbers), and a small CNN whose fully connected
layer was sized for 8x8 images and is fed 16x16 ones (the "mat1 and mat2 shapes cannot be
multiplied" error the entry's pattern also accepts). Workarounds and dead ends are applied
to the situation they talk about; each must give the right output shape, and the
dead ends' transposes are checked against what the data mean.
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, adaptive: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((8, 8)) if adaptive else nn.Identity()
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4 * 8 * 8, 10)  # sized for 8x8 inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(torch.relu(self.conv(x)))))


def shape_check(got, want, what: str) -> dict:
    return {
        "ok": tuple(got) == tuple(want),
        "detail": "%s: shape %s, expected %s" % (what, tuple(got), tuple(want)),
    }


def inputs(device):
    """The blocks a (64x8) and b (32x8), and 8x8 and 16x16 images."""
    torch.manual_seed(0)
    a = torch.randn(64, 8, device=device)
    b = torch.randn(32, 8, device=device)
    small = torch.randn(2, 1, 8, 8, device=device)
    large = torch.randn(2, 1, 16, 16, device=device)
    return a, b, small, large


def baseline_cat_batch_mismatch(device, precision):
    a, b, _, _ = inputs(device)
    out = torch.cat([a, b], dim=1)
    return {"cat_shape": shape_check(out.shape, (64, 16), "torch.cat result")}


def baseline_fc_input_size(device, precision):
    _, _, _, large = inputs(device)
    out = SmallCNN().to(device)(large)
    return {"output_shape": shape_check(out.shape, (2, 10), "model output")}


def workaround1_print_shapes(device, precision):
    return print_shapes(device, inputs(device)[3])


def print_shapes(device, image) -> dict:
    """Forward pre-hooks print each layer's input shape while the CNN runs ``image``; the
    last layer entered must be the one whose input stops fitting (fc)."""
    large = image
    model = SmallCNN().to(device)
    seen = []

    def hook(module, inputs):
        seen.append((name_of[module], tuple(inputs[0].shape)))
        print("%-8s input %s" % seen[-1])

    name_of = {m: n for n, m in model.named_children()}
    for m in name_of:
        m.register_forward_pre_hook(hook)
    try:
        model(large)
        failed_at = None
    except RuntimeError as exc:  # the diagnostic runs the failing input on purpose
        failed_at = seen[-1] if seen else None
        print("failed after", failed_at, "with", exc)
    ok = failed_at is not None and failed_at[0] == "fc" and failed_at[1][-1] != model.fc.in_features
    return {
        "names_the_layer": {
            "ok": ok,
            "detail": "shapes seen %s; last layer entered %s; fc.in_features %d"
            % (seen, failed_at, model.fc.in_features),
        }
    }


def workaround2_verify_input_dims(device, precision):
    _, _, _, large = inputs(device)
    model = SmallCNN().to(device)
    side = int((model.fc.in_features // model.conv.out_channels) ** 0.5)
    x = large
    if tuple(x.shape[-2:]) != (side, side):
        x = nn.functional.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
    out = model(x)
    return {
        "output_shape": shape_check(
            out.shape, (2, 10), "model output after resizing to %dx%d" % (side, side)
        )
    }


def workaround3_adaptive_pool(device, precision):
    _, _, small, large = inputs(device)
    model = SmallCNN(adaptive=True).to(device)
    return {
        "output_shape_16x16": shape_check(model(large).shape, (2, 10), "16x16 input"),
        "output_shape_8x8": shape_check(model(small).shape, (2, 10), "8x8 input"),
    }


def true_features(device):
    """What b should have been: the 8 features of all 64 samples (b holds the first 32)."""
    a, b, _, _ = inputs(device)
    rest = torch.randn(32, 8, device=device)
    return a, b, torch.cat([b, rest])


def same_as_per_sample(out, a, full) -> dict:
    want = torch.cat([a, full], dim=1)
    same = tuple(out.shape) == tuple(want.shape) and bool(torch.equal(out, want))
    return {
        "ok": same,
        "detail": "result %s equals torch.cat([a, the true 64x8 b], dim=1) %s: %s"
        % (tuple(out.shape), tuple(want.shape), same),
    }


def search(a, candidates) -> tuple:
    """The first candidate for b that lets torch.cat([a, b], dim=1) run, and those tried."""
    tried = []
    for text, make in candidates:
        try:
            return text, torch.cat([a, make()], dim=1), tried
        except (RuntimeError, IndexError):
            tried.append(text)
    return None, None, tried


def deadend1_unsqueeze_squeeze_search(device, precision):
    """Literal: only single unsqueeze/squeeze calls of b; none makes torch.cat run."""
    a, b, full = true_features(device)
    candidates = [("b.unsqueeze(%d)" % d, lambda d=d: b.unsqueeze(d)) for d in range(-3, 3)]
    candidates += [("b.squeeze(%d)" % d, lambda d=d: b.squeeze(d)) for d in range(-2, 2)]
    text, out, tried = search(a, candidates)
    checks = {
        "cat_runs": {
            "ok": out is not None,
            "detail": "runs with %s after trying %s" % (text, tried)
            if out is not None
            else "no single unsqueeze/squeeze of b lets torch.cat run; tried %s" % tried,
        }
    }
    if out is not None:
        checks["same_as_per_sample"] = same_as_per_sample(out, a, full)
    return checks


def deadend1_reshape_until_it_runs(device, precision):
    """Sensible: b's shape changed until torch.cat runs (unsqueeze/squeeze, then the
    expand/repeat a user reaches for next): it runs, with the first 32 samples' features
    repeated for the other 32: silently wrong numbers of the right shape."""
    a, b, full = true_features(device)
    candidates = [("b.unsqueeze(%d)" % d, lambda d=d: b.unsqueeze(d)) for d in range(-3, 3)]
    candidates += [("b.squeeze(%d)" % d, lambda d=d: b.squeeze(d)) for d in range(-2, 2)]
    candidates += [
        ("b.expand(64, 8)", lambda: b.expand(64, 8)),
        ("b.repeat(2, 1)", lambda: b.repeat(2, 1)),
    ]
    text, out, tried = search(a, candidates)
    if out is None:
        return {"cat_runs": {"ok": False, "detail": "nothing ran; tried %s" % tried}}
    return {
        "cat_shape": shape_check(out.shape, (64, 16), "torch.cat result with %s" % text),
        "same_as_per_sample": same_as_per_sample(out, a, full),
    }


def deadend2_transpose_until_it_runs(device, precision):
    """Sensible: the documented mismatch (a 64x8, b 32x8) met with transposes of b, then of
    both, until torch.cat runs: it runs as cat([a.t(), b.t()], dim=1), features by samples."""
    a, b, full = true_features(device)
    tried = []
    out = None
    for text, x, y in (("a, b.t()", a, b.t()), ("a.t(), b.t()", a.t(), b.t())):
        try:
            out = torch.cat([x, y], dim=1)
            break
        except RuntimeError:
            tried.append(text)
    if out is None:
        return {"cat_runs": {"ok": False, "detail": "no transpose ran; tried %s" % tried}}
    return {"same_as_per_sample": same_as_per_sample(out, a, full)}


def deadend2_transpose_wrong_model(device, precision):
    inputs(device)  # the same seeded draws first: the samples below come after them
    samples = torch.randn(8, 16, device=device)  # 8 samples of 16 features
    layer = nn.Linear(8, 4).to(device)  # built for 8 features: the model is what is wrong
    out = layer(samples.t())
    return {"output_shape": shape_check(out.shape, (8, 4), "one row per sample (8 samples)")}


def control_matching_shapes(device, precision):
    a, _, small, _ = inputs(device)
    out = torch.cat([a, torch.randn(64, 8, device=device)], dim=1)
    return {
        "cat_shape": shape_check(out.shape, (64, 16), "torch.cat result"),
        "output_shape": shape_check(SmallCNN().to(device)(small).shape, (2, 10), "8x8 input"),
    }


VARIANTS = {
    "baseline-cat-batch-mismatch": baseline_cat_batch_mismatch,
    "baseline-fc-input-size": baseline_fc_input_size,
    "workaround1-print-shapes": workaround1_print_shapes,
    "workaround2-verify-input-dims": workaround2_verify_input_dims,
    "workaround3-adaptive-pool": workaround3_adaptive_pool,
    "deadend1-unsqueeze-squeeze-search": deadend1_unsqueeze_squeeze_search,
    "deadend1-reshape-until-it-runs": deadend1_reshape_until_it_runs,
    "deadend2-transpose-until-it-runs": deadend2_transpose_until_it_runs,
    "deadend2-transpose-wrong-model": deadend2_transpose_wrong_model,
    "control-matching-shapes": control_matching_shapes,
}
