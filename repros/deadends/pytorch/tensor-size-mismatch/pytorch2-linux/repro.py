"""Reproducer: "Sizes of tensors must match except in dimension 1. Expected 64 but got 32"
(deadends.dev pytorch/tensor-size-mismatch/pytorch2-linux).

Two situations the entry covers: torch.cat along dim 1 of two feature blocks whose batch
sizes differ (64 and 32, the documented numbers), and a small CNN whose fully connected
layer was sized for 8x8 images and is fed 16x16 ones (the "mat1 and mat2 shapes cannot be
multiplied" error the entry's pattern also accepts). Workarounds and dead ends are applied
to the situation they talk about; each must give the right output shape, and the
dead ends' transposes are checked against what the data mean.

    python repro.py --list
    python repro.py --variant baseline-cat-batch-mismatch --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import check_variant, main  # noqa: E402

# reprokit:end

VARIANTS = {
    "baseline-cat-batch-mismatch": "torch.cat([a (64x8), b (32x8)], dim=1)",
    "baseline-fc-input-size": "CNN with its Linear sized for 8x8 inputs, fed 16x16 inputs",
    "workaround1-print-shapes": "forward hooks print each layer's input shape while the CNN runs the 16x16 input; must name the layer where the shapes stop fitting",
    "workaround2-verify-input-dims": "compare the input with what the model expects (Linear.in_features) and resize the 16x16 input to 8x8 before the model",
    "workaround3-adaptive-pool": "nn.AdaptiveAvgPool2d before the Linear; 8x8 and 16x16 inputs",
    "deadend1-unsqueeze-squeeze-search": "try every single unsqueeze/squeeze of b until torch.cat([a, b], dim=1) runs",
    "deadend2-transpose-feature-major": "features stored feature-major (8 features x 16 samples) into Linear(8, 4): x.t()",
    "deadend2-transpose-wrong-model": "16-feature samples (8 x 16) into a Linear(8, 4) built for 8 features: x.t() to make it run",
    "control-matching-shapes": "torch.cat of two 64-row blocks, and the CNN fed the 8x8 inputs it was built for",
}
NOT_WRITTEN: list[str] = []


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


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    torch.manual_seed(0)
    a = torch.randn(64, 8, device=device)
    b = torch.randn(32, 8, device=device)
    small = torch.randn(2, 1, 8, 8, device=device)
    large = torch.randn(2, 1, 16, 16, device=device)

    if variant == "baseline-cat-batch-mismatch":
        out = torch.cat([a, b], dim=1)
        return {"cat_shape": shape_check(out.shape, (64, 16), "torch.cat result")}
    if variant == "baseline-fc-input-size":
        out = SmallCNN().to(device)(large)
        return {"output_shape": shape_check(out.shape, (2, 10), "model output")}
    if variant == "workaround1-print-shapes":
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
        ok = (
            failed_at is not None
            and failed_at[0] == "fc"
            and failed_at[1][-1] != model.fc.in_features
        )
        return {
            "names_the_layer": {
                "ok": ok,
                "detail": "shapes seen %s; last layer entered %s; fc.in_features %d"
                % (seen, failed_at, model.fc.in_features),
            }
        }
    if variant == "workaround2-verify-input-dims":
        model = SmallCNN().to(device)
        side = int((model.fc.in_features // model.conv.out_channels) ** 0.5)
        x = large
        if tuple(x.shape[-2:]) != (side, side):
            x = nn.functional.interpolate(
                x, size=(side, side), mode="bilinear", align_corners=False
            )
        out = model(x)
        return {
            "output_shape": shape_check(
                out.shape, (2, 10), "model output after resizing to %dx%d" % (side, side)
            )
        }
    if variant == "workaround3-adaptive-pool":
        model = SmallCNN(adaptive=True).to(device)
        return {
            "output_shape_16x16": shape_check(model(large).shape, (2, 10), "16x16 input"),
            "output_shape_8x8": shape_check(model(small).shape, (2, 10), "8x8 input"),
        }
    if variant == "deadend1-unsqueeze-squeeze-search":
        tried = []
        candidates = [("b.unsqueeze(%d)" % d, lambda d=d: b.unsqueeze(d)) for d in range(-3, 3)]
        candidates += [("b.squeeze(%d)" % d, lambda d=d: b.squeeze(d)) for d in range(-2, 2)]
        last = None
        for text, make in candidates:
            try:
                out = torch.cat([a, make()], dim=1)
            except (RuntimeError, IndexError) as exc:
                tried.append(text)
                last = exc
                continue
            print("runs with", text, "after trying", tried)
            return {
                "cat_shape": shape_check(out.shape, (64, 16), "torch.cat result with %s" % text)
            }
        print("no single unsqueeze/squeeze of b lets torch.cat run; tried", tried)
        raise last
    if variant == "deadend2-transpose-feature-major":
        samples = torch.randn(16, 8, device=device)  # 16 samples of 8 features
        stored = samples.t().contiguous()  # stored feature-major: 8 x 16
        layer = nn.Linear(8, 4).to(device)
        out = layer(stored.t())
        want = layer(samples)
        return {
            "output_shape": shape_check(out.shape, (16, 4), "one row per sample"),
            "same_as_per_sample": {
                "ok": bool(torch.allclose(out, want)),
                "detail": "max |difference| from the per-sample result %s"
                % (out - want).abs().max().item(),
            },
        }
    if variant == "deadend2-transpose-wrong-model":
        samples = torch.randn(8, 16, device=device)  # 8 samples of 16 features
        layer = nn.Linear(8, 4).to(device)  # built for 8 features: the model is what is wrong
        out = layer(samples.t())
        return {"output_shape": shape_check(out.shape, (8, 4), "one row per sample (8 samples)")}
    # control
    out = torch.cat([a, torch.randn(64, 8, device=device)], dim=1)
    return {
        "cat_shape": shape_check(out.shape, (64, 16), "torch.cat result"),
        "output_shape": shape_check(SmallCNN().to(device)(small).shape, (2, 10), "8x8 input"),
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
