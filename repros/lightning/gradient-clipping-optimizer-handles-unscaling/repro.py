"""Reproducer: "Gradient clipping is not implemented for optimizers handling the unscaling."
(lightning/gradient-clipping-optimizer-handles-unscaling)

Lightning Fabric with 16-mixed precision (a GradScaler) and a fused AdamW, which unscales
inside its own step (`_step_supports_amp_scaling`), then `fabric.clip_gradients`. The Trainer
path raises a related RuntimeError ("The current optimizer, AdamW, does not allow for
gradient clipping ...").

Precision: fp32 = '32-true', fp16 = '16-mixed', bf16 = 'bf16-mixed' where the variant does
not fix it (entry.yaml does). Lightning switches '16-mixed' to 'bf16-mixed' on CPU: where it will not run the
precision a variant asks for, the variant is unsupported (decided once the Fabric or Trainer
is configured, before it trains), with what Lightning runs instead as the reason.
"""

from __future__ import annotations

import tempfile
import warnings

import torch
from reprokit import (
    LIGHTNING_PRECISION,
    Unsupported,
    above,
    at_most,
    autocast_dtype,
    check_fused_adamw,
    describe_plugin,
    finite,
    import_lightning,
    lightning_submodule,
    make_scaler,
    moved,
    require_plugin_precision,
    with_lightning_precision,
)
from torch import nn

STEPS = 3
LR = 1e-2
CLIP = (
    0.5  # below the natural total gradient norm of this model and data (~1.7), so the check binds
)

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


def fabric_for(lf, device: str, precision: str, explicit_plugin: bool, clip: bool = True):
    """A Fabric running exactly `precision` (Unsupported where Lightning would run another);
    ``clip``: the variant clips, so Fabric must have clip_gradients."""
    autocast_dtype(device, precision)
    if clip and not hasattr(lf.Fabric, "clip_gradients"):
        raise Unsupported(
            "{}.Fabric has no clip_gradients in {}".format(
                lf.__name__, getattr(lf, "__version__", "?")
            )
        )
    amp = lightning_submodule(
        lf, "plugins.precision.amp", "MixedPrecision with '16-mixed', the document's API"
    )
    kwargs = {"accelerator": device, "devices": 1}
    if explicit_plugin and precision != "fp32":
        scaler = make_scaler(device)[0] if precision == "fp16" else None
        kwargs["plugins"] = amp.MixedPrecision(
            LIGHTNING_PRECISION[precision], device, scaler=scaler
        )
        asked = f"MixedPrecision({LIGHTNING_PRECISION[precision]!r}, {device!r})"
        fabric = lf.Fabric(**kwargs)
        require_plugin_precision(fabric.strategy.precision, precision, asked)
        return fabric
    fabric, flag = with_lightning_precision(lambda f: lf.Fabric(precision=f, **kwargs), precision)
    asked = f"Fabric(accelerator={device!r}, precision={flag!r})"
    require_plugin_precision(fabric.strategy.precision, precision, asked, flag)
    return fabric


def make_adamw(params, fused: bool):
    if fused:
        return torch.optim.AdamW(params, lr=LR, fused=True)
    return torch.optim.AdamW(params, lr=LR)


def fabric_train(
    lf, device: str, precision: str, *, explicit_plugin: bool, fused: bool, clip: bool
) -> dict:
    if fused:
        check_fused_adamw(device, LR)
    fabric = fabric_for(lf, device, precision, explicit_plugin, clip)
    torch.manual_seed(0)
    model = make_net().to(fabric.device)
    optimizer = make_adamw(model.parameters(), fused)
    model, optimizer = fabric.setup(model, optimizer)
    params = dict(model.named_parameters())
    before = {n: p.detach().clone() for n, p in params.items()}
    x, y = make_data(fabric.device)
    losses, before_clip, after_clip = [], [], []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = ((model(x).float() - y) ** 2).mean()
        fabric.backward(loss)
        if clip:
            total = fabric.clip_gradients(model, optimizer, max_norm=CLIP)
            before_clip.append(float(total) if total is not None else float("nan"))
            after_clip.append(grad_norm(params.values()))
        optimizer.step()
        losses.append(loss.item())
    checks = {"loss_finite": finite(losses), "params_moved": moved(before, params)}
    if clip:
        checks["clipped"] = at_most(after_clip, CLIP * 1.001, "gradient norm after clipping")
        # the natural norm must exceed the clip value, or clipping is not tested at all
        checks["clip_binds"] = above(before_clip, CLIP, "norm before clipping (as returned)")
    return checks


# Lightning's pytorch mixed-precision plugin, by release: (class, its precision argument)
TRAINER_AMP = (
    ("MixedPrecision", "16-mixed"),  # 2.1 and later
    ("MixedPrecisionPlugin", None),  # 1.9 ("16") and 2.0 ("16-mixed")
    ("NativeMixedPrecisionPlugin", 16),  # 1.8
)


def trainer_scaler_plugin(lp, device: str):
    """Lightning's own fp16 plugin with an explicit GradScaler on ``device``: where the
    Trainer's precision='16-mixed' switches to bf16 on CPU, this keeps a real scaler."""
    precision = lightning_submodule(lp, "plugins.precision", "the Trainer's precision plugins")
    for name, flag in TRAINER_AMP:
        cls = getattr(precision, name, None)
        if cls is None:
            continue
        scaler = make_scaler(device)[0]
        if flag is None:  # MixedPrecisionPlugin: 1.9 takes "16", 2.0 "16-mixed"
            flag = "16" if str(getattr(lp, "__version__", "2")).startswith("1.") else "16-mixed"
        return cls(flag, device, scaler=scaler), "%s(%r, %r, scaler=GradScaler)" % (
            name,
            flag,
            device,
        )
    raise Unsupported(
        "no mixed-precision plugin among %s in %s"
        % ([n for n, _ in TRAINER_AMP], getattr(lp, "__version__", "?"))
    )


def trainer_train(device: str, precision: str, scaler_plugin: bool = False) -> dict:
    """Trainer(gradient_clip_val=CLIP) with a fused AdamW, in ``precision`` (or, with
    ``scaler_plugin``, with Lightning's fp16 plugin holding an explicit GradScaler)."""
    check_fused_adamw(device, LR)
    autocast_dtype(device, precision)
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
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    x, y = make_data("cpu")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    with tempfile.TemporaryDirectory() as root:
        options = dict(
            accelerator=device,
            devices=1,
            gradient_clip_val=CLIP,
            max_steps=STEPS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
        )
        if scaler_plugin:
            amp, flag = trainer_scaler_plugin(lp, device)
            trainer = lp.Trainer(plugins=[amp], **options)
        else:
            # the precision spelt as the installed Lightning takes it ('16-mixed', or 16 in 1.8/1.9)
            trainer, flag = with_lightning_precision(
                lambda f: lp.Trainer(precision=f, **options), precision
            )
        plugin = trainer.strategy.precision_plugin
        # recorded by the harness even when fit() raises: which precision really runs
        warnings.warn(
            f"repro: Trainer(precision={flag!r}) on {device} runs {describe_plugin(plugin)}",
            stacklevel=1,
        )
        asked = f"Trainer(accelerator={device!r}, " + (
            f"plugins=[{flag}])" if scaler_plugin else f"precision={flag!r})"
        )
        require_plugin_precision(plugin, precision, asked, None if scaler_plugin else flag)
        trainer.fit(module, loader)
    return {
        "loss_finite": finite(seen["losses"]),
        "params_moved": moved(before, dict(module.named_parameters())),
        "clipped": at_most(seen["norms"], CLIP * 1.001, "gradient norm after Lightning's clipping"),
    }


# -- from the document ("Example fix"), as written; the import is the document's own ----------


def clipping_supported(plugin, optimizer) -> bool:
    from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling

    return plugin.scaler is None or not _optimizer_handles_unscaling(optimizer)


def can_clip_gradients(plugin, optimizer) -> bool:
    from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling

    return plugin.scaler is None or not _optimizer_handles_unscaling(optimizer)


# -----------------------------------------------------------------------------------------


def example_fix_helpers(device: str, precision: str) -> dict:
    """The document's helpers against what fabric.clip_gradients really does."""
    check_fused_adamw(device, LR)
    lf = import_lightning("fabric")
    fabric = fabric_for(lf, device, precision, explicit_plugin=True)
    try:
        from lightning.fabric.plugins.precision.amp import _optimizer_handles_unscaling  # noqa: F401
    except ImportError as exc:
        raise Unsupported(f"the document's import fails: {exc}") from exc
    plugin = fabric.strategy.precision
    checks = {}
    x, y = make_data(fabric.device)
    for label, fused in (("fused", True), ("plain", False)):
        torch.manual_seed(0)
        model = make_net().to(fabric.device)
        model, optimizer = fabric.setup(model, make_adamw(model.parameters(), fused))
        predicted = (clipping_supported(plugin, optimizer), can_clip_gradients(plugin, optimizer))
        fabric.backward(((model(x).float() - y) ** 2).mean())
        try:  # ground truth for the helpers; the error itself is the other variants' subject
            fabric.clip_gradients(model, optimizer, max_norm=CLIP)
            actual, how = True, "clip_gradients succeeded"
        except NotImplementedError as exc:
            actual, how = False, f"clip_gradients raised NotImplementedError: {exc}"
        checks[f"helpers_right_on_{label}_optimizer"] = {
            "ok": predicted == (actual, actual),
            "detail": f"clipping_supported={predicted[0]}, can_clip_gradients={predicted[1]}; {how}; {describe_plugin(plugin)}",
        }
    return checks


def fabric(device, precision, **options):
    return fabric_train(import_lightning("fabric"), device, precision, **options)


def baseline_fabric_plugin(device, precision):
    return fabric(device, precision, explicit_plugin=True, fused=True, clip=True)


def baseline_fabric_config(device, precision):
    return fabric(device, precision, explicit_plugin=False, fused=True, clip=True)


def baseline_trainer(device, precision):
    return trainer_train(device, precision)


def baseline_trainer_scaler_plugin(device, precision):
    return trainer_train(device, precision, scaler_plugin=True)


def solution1_bf16_mixed(device, precision):
    return fabric(device, precision, explicit_plugin=False, fused=True, clip=True)


def solution1_trainer_bf16_mixed(device, precision):
    return trainer_train(device, precision)


def solution2_plain_optimizer(device, precision):
    return fabric(device, precision, explicit_plugin=True, fused=False, clip=True)


def solution3_no_clipping(device, precision):
    return fabric(device, precision, explicit_plugin=True, fused=True, clip=False)


def control_plain_clip(device, precision):
    return fabric(device, precision, explicit_plugin=True, fused=False, clip=True)


VARIANTS = {
    "baseline-fabric-plugin": baseline_fabric_plugin,
    "baseline-fabric-config": baseline_fabric_config,
    "baseline-trainer": baseline_trainer,
    "baseline-trainer-scaler-plugin": baseline_trainer_scaler_plugin,
    "solution1-bf16-mixed": solution1_bf16_mixed,
    "solution1-trainer-bf16-mixed": solution1_trainer_bf16_mixed,
    "solution2-plain-optimizer": solution2_plain_optimizer,
    "solution3-no-clipping": solution3_no_clipping,
    "example-fix-helpers": example_fix_helpers,
    "control-plain-clip": control_plain_clip,
}
