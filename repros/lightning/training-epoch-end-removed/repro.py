"""Reproducer: "Support for `training_epoch_end` has been removed in v2.0.0"
(lightning/training-epoch-end-removed).

A LightningModule that collects its step losses in `training_epoch_end(self, outputs)`, the
hook Lightning 2.0.0 removed (CHANGELOG.md 2.0.0, "Removed", #16520), trained for one epoch
of four batches on the CPU. The workarounds and the dead end change where the epoch-end code
lives; workaround 2 (pin Lightning below 2.0) is version advice: the harness installs the
pinned release as pip would (entry.yaml `requires`), and the variant trains the baseline's
module there: `pytorch-lightning<2.0` (the document's command) beside the cell's lightning,
which the module's `lightning.pytorch` still is; `lightning<2.0` in its place.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, finite, import_lightning
from torch import nn

BATCHES = 4


def _modules(pl):
    """The modules the variants train, on the installed Lightning's LightningModule."""

    class Base(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 1)
            self.epoch_losses = None  # what the epoch-end code computed

        def training_step(self, batch, batch_idx):
            x, y = batch
            return {"loss": nn.functional.mse_loss(self.layer(x), y)}

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class OldHook(Base):
        def training_epoch_end(self, outputs):
            self.epoch_losses = [float(o["loss"]) for o in outputs]

    class NewHook(Base):
        def __init__(self):
            super().__init__()
            self.step_losses = []

        def training_step(self, batch, batch_idx):
            out = super().training_step(batch, batch_idx)
            self.step_losses.append(out["loss"].detach())
            return out

        def on_train_epoch_end(self):
            self.epoch_losses = [float(v) for v in self.step_losses]
            self.step_losses.clear()

    class Renamed(Base):
        def on_train_epoch_end(self, outputs):
            self.epoch_losses = [float(o["loss"]) for o in outputs]

    return {"base": Base, "old": OldHook, "new": NewHook, "renamed": Renamed}


def train(device, precision, module) -> dict:
    """One epoch of four batches of ``module`` (a key of ``modules``): the optimizer steps,
    and (where it has epoch-end code) whether that code saw every step's loss."""
    if device != "cpu" or precision != "fp32":
        raise Unsupported("the hook's removal does not depend on the device: cpu, fp32 only")
    pl = import_lightning("pytorch")
    torch.manual_seed(0)
    x = torch.randn(BATCHES * 4, 4)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4
    )
    model = _modules(pl)[module]()
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data)
    checks = {
        "trained": {
            "ok": trainer.global_step == BATCHES,
            "detail": "%d optimizer steps of %d" % (trainer.global_step, BATCHES),
        }
    }
    if module != "base":
        losses = model.epoch_losses or []
        checks["epoch_end_saw_every_step"] = {
            "ok": len(losses) == BATCHES and finite(losses)["ok"],
            "detail": "the epoch-end code saw %d of %d step losses: %s"
            % (len(losses), BATCHES, losses),
        }
    return checks


def baseline_training_epoch_end(device, precision):
    return train(device, precision, "old")


def workaround1_on_train_epoch_end(device, precision):
    return train(device, precision, "new")


def workaround2_pin_pytorch_lightning(device, precision):
    # pytorch-lightning<2.0 is installed by the harness (entry.yaml requires) beside the
    # cell's lightning, as pip leaves it; the module imports lightning.pytorch as before
    return train(device, precision, "old")


def workaround2_pin_lightning(device, precision):
    # lightning<2.0 is installed by the harness (entry.yaml requires)
    return train(device, precision, "old")


def deadend1_rename_keeping_outputs(device, precision):
    return train(device, precision, "renamed")


def control_no_epoch_end(device, precision):
    return train(device, precision, "base")


VARIANTS = {
    "baseline-training-epoch-end": baseline_training_epoch_end,
    "workaround1-on-train-epoch-end": workaround1_on_train_epoch_end,
    "workaround2-pin-pytorch-lightning": workaround2_pin_pytorch_lightning,
    "workaround2-pin-lightning": workaround2_pin_lightning,
    "deadend1-rename-keeping-outputs": deadend1_rename_keeping_outputs,
    "control-no-epoch-end": control_no_epoch_end,
}
