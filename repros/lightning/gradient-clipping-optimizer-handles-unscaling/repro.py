"""Reproducer: "Gradient clipping is not implemented for optimizers handling the unscaling."
(lightning/gradient-clipping-optimizer-handles-unscaling)

Lightning Fabric with 16-mixed precision (a GradScaler) and a fused AdamW, which unscales
inside its own step (`_step_supports_amp_scaling`), then `fabric.clip_gradients`. The Trainer
path raises a related RuntimeError ("The current optimizer, AdamW, does not allow for
gradient clipping ...").

    python repro.py --list
    python repro.py --variant baseline-fabric-plugin --device cpu --precision fp16

Precision: fp32 = '32-true', fp16 = '16-mixed', bf16 = 'bf16-mixed' where the variant does
not fix it. Lightning may switch '16-mixed' to 'bf16-mixed' on CPU: the check
`precision_as_requested` reports what really ran.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import tempfile
import warnings

import torch
from torch import nn

STEPS = 3
LR = 1e-2
CLIP = (
    0.5  # below the natural total gradient norm of this model and data (~1.7), so the check binds
)


class Unsupported(Exception):
    """The variant's intent cannot be expressed with this torch/lightning on this device."""


VARIANTS = {
    "baseline-fabric-plugin": "Fabric(plugins=MixedPrecision('16-mixed', device, scaler=GradScaler)), fused AdamW, clip_gradients",
    "baseline-fabric-config": "Fabric(precision='16-mixed'), fused AdamW, clip_gradients",
    "baseline-trainer": "Trainer(precision='16-mixed', gradient_clip_val=CLIP), fused AdamW",
    "solution1-bf16-mixed": "Fabric(precision='bf16-mixed'), fused AdamW, clip_gradients",
    "solution1-trainer-bf16-mixed": "Trainer(precision='bf16-mixed', gradient_clip_val=CLIP), fused AdamW",
    "solution2-plain-optimizer": "as baseline-fabric-plugin with a plain (non-fused) AdamW",
    "solution3-no-clipping": "as baseline-fabric-plugin without clip_gradients",
    "example-fix-helpers": "the document's clipping_supported/can_clip_gradients vs what clip_gradients really does",
    "control-plain-clip": "plain AdamW, clip_gradients, explicit precision plugin",
}
# variants whose intent fixes the precision (entry.yaml restricts them to it)
FIXED_PRECISION = {
    "baseline-fabric-plugin": "fp16",
    "baseline-fabric-config": "fp16",
    "baseline-trainer": "fp16",
    "solution1-bf16-mixed": "bf16",
    "solution1-trainer-bf16-mixed": "bf16",
    "solution2-plain-optimizer": "fp16",
    "solution3-no-clipping": "fp16",
}
LIGHTNING_PRECISION = {"fp32": "32-true", "fp16": "16-mixed", "bf16": "bf16-mixed"}


# -- capabilities (checked before the behaviour under test) ------------------------------


def import_lightning(part: str):
    """lightning.<part> (the unified package) or its standalone twin (lightning_fabric, pytorch_lightning)."""
    try:
        return importlib.import_module("lightning." + part)
    except ImportError:
        return importlib.import_module(
            {"fabric": "lightning_fabric", "pytorch": "pytorch_lightning"}[part]
        )


def amp_module(lf):
    try:
        return importlib.import_module(lf.__name__ + ".plugins.precision.amp")
    except ImportError as exc:
        raise Unsupported(
            "{}.plugins.precision.amp (MixedPrecision with '16-mixed', the document's API) is "
            "missing in {} {}: {}".format(
                lf.__name__, lf.__name__, getattr(lf, "__version__", "?"), exc
            )
        ) from exc


def check_autocast(device: str, precision: str) -> None:
    if precision == "fp32":
        return
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a = torch.ones(4, 4, device=device)
    try:
        with torch.autocast(device, dtype=dtype):
            produced = torch.mm(a, a).dtype
    except Exception as exc:  # old CPU autocast refuses float16 on entry
        raise Unsupported(
            f"torch.autocast({device!r}, dtype={dtype}) is not available: {exc}"
        ) from exc
    if produced != dtype:
        raise Unsupported(
            f"torch.autocast({device!r}, dtype={dtype}) produced {produced} from torch.mm"
        )


def make_scaler(device: str):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        scaler, api = amp.GradScaler(device), f"torch.amp.GradScaler({device!r})"
    elif device == "cuda":
        scaler, api = torch.cuda.amp.GradScaler(), "torch.cuda.amp.GradScaler()"
    else:
        raise Unsupported(
            f"no GradScaler for {device!r}: torch.amp.GradScaler is missing and torch.cuda.amp.GradScaler "
            "only scales CUDA tensors"
        )
    if not scaler.is_enabled():
        raise Unsupported(f"{api} disabled itself on {device!r} (scaler.is_enabled() is False)")
    return scaler


def check_fused_adamw(device: str) -> None:
    p = torch.zeros(2, device=device, requires_grad=True)
    try:
        opt = torch.optim.AdamW([p], lr=LR, fused=True)
        p.grad = torch.ones_like(p)
        opt.step()
    except Exception as exc:
        raise Unsupported(
            f"torch.optim.AdamW(fused=True) does not work on {device!r}: {type(exc).__name__}: {exc}"
        ) from exc


# -- shared pieces ----------------------------------------------------------------------


def make_net() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def make_data(device: str):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=g)
    y = 3.0 * torch.randn(32, 1, generator=g)
    return x.to(device), y.to(device)


def grad_norm(params) -> float:
    grads = [p.grad.detach().float() for p in params if p.grad is not None]
    return torch.norm(torch.stack([g.norm(2) for g in grads]), 2).item() if grads else 0.0


def describe(plugin) -> str:
    scaler = getattr(plugin, "scaler", None)
    return "{}(precision={!r}), scaler={}".format(
        type(plugin).__name__,
        getattr(plugin, "precision", "?"),
        "None" if scaler is None else f"{type(scaler).__name__} enabled={scaler.is_enabled()}",
    )


def precision_check(plugin, precision: str) -> dict:
    """The variant asked for `precision`; did Lightning run it, with a scaler exactly for 16-mixed?"""
    wanted = LIGHTNING_PRECISION[precision]
    scaler = getattr(plugin, "scaler", None)
    got = str(getattr(plugin, "precision", "?"))
    ok = got == wanted and ((scaler is not None and scaler.is_enabled()) == (wanted == "16-mixed"))
    return {"ok": ok, "detail": f"asked for {wanted!r}, ran {describe(plugin)}"}


def fabric_for(lf, device: str, precision: str, explicit_plugin: bool):
    check_autocast(device, precision)
    if not hasattr(lf.Fabric, "clip_gradients"):
        raise Unsupported(
            "{}.Fabric has no clip_gradients in {}".format(
                lf.__name__, getattr(lf, "__version__", "?")
            )
        )
    amp = amp_module(lf)
    kwargs = {"accelerator": device, "devices": 1}
    if explicit_plugin and precision != "fp32":
        scaler = make_scaler(device) if precision == "fp16" else None
        kwargs["plugins"] = amp.MixedPrecision(
            LIGHTNING_PRECISION[precision], device, scaler=scaler
        )
    else:
        kwargs["precision"] = LIGHTNING_PRECISION[precision]
    return lf.Fabric(**kwargs)


def fabric_train(
    lf, device: str, precision: str, *, explicit_plugin: bool, fused: bool, clip: bool
) -> dict:
    if fused:
        check_fused_adamw(device)
    fabric = fabric_for(lf, device, precision, explicit_plugin)
    plugin = fabric.strategy.precision
    torch.manual_seed(0)
    model = make_net().to(fabric.device)
    optimizer = (
        torch.optim.AdamW(model.parameters(), lr=LR, fused=fused)
        if fused
        else torch.optim.AdamW(model.parameters(), lr=LR)
    )
    model, optimizer = fabric.setup(model, optimizer)
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    x, y = make_data(fabric.device)
    losses, norms = [], []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = ((model(x).float() - y) ** 2).mean()
        fabric.backward(loss)
        if clip:
            total = fabric.clip_gradients(model, optimizer, max_norm=CLIP)
            norms.append((float(total) if total is not None else float("nan"), grad_norm(params)))
        optimizer.step()
        losses.append(loss.item())
    moved = [(p.detach() - b).abs().max().item() for p, b in zip(params, before)]  # noqa: B905 (Python 3.9)
    checks = {
        "loss_finite": {"ok": all(math.isfinite(v) for v in losses), "detail": f"losses={losses}"},
        "params_moved": {
            "ok": all(m > 0 for m in moved),
            "detail": f"max |change| per tensor: {moved}",
        },
        "precision_as_requested": precision_check(plugin, precision),
    }
    if clip:
        checks["clipped"] = {
            "ok": all(after <= CLIP * 1.001 for _, after in norms),
            "detail": f"(norm before clipping as returned, norm after) per step: {norms}; clip {CLIP}",
        }
        checks["clip_binds"] = {
            "ok": all(b > CLIP for b, _ in norms),
            "detail": f"the natural norm must exceed the clip value {CLIP}: {[b for b, _ in norms]}",
        }
    return checks


def trainer_train(device: str, precision: str) -> dict:
    check_fused_adamw(device)
    check_autocast(device, precision)
    lp = import_lightning("pytorch")
    seen = {"losses": [], "norms": []}

    class LitNet(lp.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_net()

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = ((self.net(x).float() - y) ** 2).mean()
            seen["losses"].append(loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=LR, fused=True)

        def configure_gradient_clipping(self, optimizer, *args, **kwargs):
            super().configure_gradient_clipping(
                optimizer, *args, **kwargs
            )  # Lightning's own clipping
            seen["norms"].append(grad_norm(self.parameters()))  # the norm after it

    torch.manual_seed(0)
    module = LitNet()
    before = [p.detach().clone() for p in module.parameters()]
    x, y = make_data("cpu")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    with tempfile.TemporaryDirectory() as root:
        trainer = lp.Trainer(
            accelerator=device,
            devices=1,
            precision=LIGHTNING_PRECISION[precision],
            gradient_clip_val=CLIP,
            max_steps=STEPS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
        )
        plugin = trainer.strategy.precision_plugin
        # recorded by the harness even when fit() raises: which precision really runs
        warnings.warn(
            f"repro: Trainer(precision={LIGHTNING_PRECISION[precision]!r}) on {device} runs {describe(plugin)}",
            stacklevel=1,
        )
        trainer.fit(module, loader)
    moved = [(p.detach().cpu() - b).abs().max().item() for p, b in zip(module.parameters(), before)]  # noqa: B905
    return {
        "loss_finite": {
            "ok": all(math.isfinite(v) for v in seen["losses"]),
            "detail": "losses={}".format(seen["losses"]),
        },
        "params_moved": {
            "ok": all(m > 0 for m in moved),
            "detail": f"max |change| per tensor: {moved}",
        },
        "precision_as_requested": precision_check(plugin, precision),
        "clipped": {
            "ok": bool(seen["norms"]) and all(n <= CLIP * 1.001 for n in seen["norms"]),
            "detail": "grad norm after Lightning's clipping: {}; clip {}".format(
                seen["norms"], CLIP
            ),
        },
    }


def example_fix_helpers(device: str, precision: str) -> dict:
    """The document's helpers, verbatim, against what fabric.clip_gradients really does."""
    check_fused_adamw(device)
    lf = import_lightning("fabric")
    fabric = fabric_for(lf, device, precision, explicit_plugin=True)
    try:
        from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling
    except ImportError as exc:
        raise Unsupported(f"the document's import fails: {exc}") from exc

    # -- from the document, as written ---------------------------------------------------
    def clipping_supported(plugin, optimizer) -> bool:
        return plugin.scaler is None or not _optimizer_handles_unscaling(optimizer)

    def can_clip_gradients(plugin, optimizer) -> bool:
        from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling

        return plugin.scaler is None or not _optimizer_handles_unscaling(optimizer)

    # -------------------------------------------------------------------------------------

    plugin = fabric.strategy.precision
    checks = {"precision_as_requested": precision_check(plugin, precision)}
    x, y = make_data(fabric.device)
    for label, fused in (("fused", True), ("plain", False)):
        torch.manual_seed(0)
        model = make_net().to(fabric.device)
        optimizer = (
            torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
            if fused
            else torch.optim.AdamW(model.parameters(), lr=LR)
        )
        model, optimizer = fabric.setup(model, optimizer)
        predicted = (clipping_supported(plugin, optimizer), can_clip_gradients(plugin, optimizer))
        fabric.backward(((model(x).float() - y) ** 2).mean())
        try:  # ground truth for the helpers; the error itself is the other variants' subject
            fabric.clip_gradients(model, optimizer, max_norm=CLIP)
            actual, how = True, "clip_gradients succeeded"
        except NotImplementedError as exc:
            actual, how = False, f"clip_gradients raised NotImplementedError: {exc}"
        checks[f"helpers_right_on_{label}_optimizer"] = {
            "ok": predicted == (actual, actual),
            "detail": f"clipping_supported={predicted[0]}, can_clip_gradients={predicted[1]}; {how}; {describe(plugin)}",
        }
    return checks


def run(variant: str, device: str = "cpu", precision: str = "fp16") -> dict:
    if variant not in VARIANTS:
        raise ValueError("unknown variant {!r}; known: {}".format(variant, ", ".join(VARIANTS)))
    if FIXED_PRECISION.get(variant, precision) != precision:
        raise ValueError(
            f"variant {variant} is defined for precision {FIXED_PRECISION[variant]} only"
        )
    if variant in ("baseline-trainer", "solution1-trainer-bf16-mixed"):
        return trainer_train(device, precision)
    if variant == "example-fix-helpers":
        return example_fix_helpers(device, precision)
    lf = import_lightning("fabric")
    options = {
        "baseline-fabric-plugin": dict(explicit_plugin=True, fused=True, clip=True),
        "baseline-fabric-config": dict(explicit_plugin=False, fused=True, clip=True),
        "solution1-bf16-mixed": dict(explicit_plugin=False, fused=True, clip=True),
        "solution2-plain-optimizer": dict(explicit_plugin=True, fused=False, clip=True),
        "solution3-no-clipping": dict(explicit_plugin=True, fused=True, clip=False),
        "control-plain-clip": dict(explicit_plugin=True, fused=False, clip=True),
    }[variant]
    return fabric_train(lf, device, precision, **options)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="baseline-fabric-plugin")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16"],
        help="default: the variant's own, else fp16",
    )
    parser.add_argument("--list", action="store_true", help="list the variants and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, text in VARIANTS.items():
            print(f"{name:<28} {text}")
        return 0
    args.precision = args.precision or FIXED_PRECISION.get(args.variant, "fp16")
    print(f"torch {torch.__version__}, variant {args.variant}, {args.device}, {args.precision}")
    try:
        checks = run(args.variant, args.device, args.precision)
    except Unsupported as exc:
        print("UNSUPPORTED:", exc)
        return 2
    except Exception as exc:
        print(f"RAISED {type(exc).__name__}: {exc}")
        return 1
    for name, check in checks.items():
        mark = "ok  " if check["ok"] else "FAIL"
        print(f"{name:<26} {mark}  {check['detail']}")
    return 0 if all(c["ok"] for c in checks.values()) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
