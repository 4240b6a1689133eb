"""Reproducer: "Support for `training_epoch_end` has been removed in v2.0.0"
(lightning/training-epoch-end-removed).

A LightningModule that collects its step losses in `training_epoch_end(self, outputs)`, the
hook Lightning 2.0.0 removed (CHANGELOG.md 2.0.0, "Removed", #16520), trained for one epoch
of four batches on the CPU. The workarounds and the dead end change where the epoch-end code
lives; workaround 2 (pin Lightning below 2.0) is version advice: the harness installs the
pinned release (entry.yaml `requires`), and the variant trains the baseline's module there.

    python repro.py --list
    python repro.py --variant baseline-training-epoch-end --device cpu --precision fp32
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
from reprokit import Unsupported, check_variant, finite, import_lightning, main  # noqa: E402

# reprokit:end

BATCHES = 4

VARIANTS = {
    "baseline-training-epoch-end": "training_epoch_end(self, outputs) averages the epoch's step losses",
    "workaround1-on-train-epoch-end": "on_train_epoch_end(self) averages the losses training_step kept in a list on the module",
    "workaround2-pin-pytorch-lightning": "the baseline's module, with pytorch-lightning<2.0 installed as the workaround's command says",
    "workaround2-pin-lightning": "the baseline's module, with the lightning package the cell has pinned below 2.0 (lightning<2.0)",
    "deadend1-rename-keeping-outputs": "the hook renamed on_train_epoch_end(self, outputs), its body unchanged",
    "control-no-epoch-end": "the same module and training without an epoch-end hook",
}
NOT_WRITTEN = []


def _modules(pl):
    class Base(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 1)
            self.epoch_losses = None  # what the epoch-end code computed

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = nn.functional.mse_loss(self.layer(x), y)
            return {"loss": loss}

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

    return {
        "baseline-training-epoch-end": OldHook,
        "workaround1-on-train-epoch-end": NewHook,
        "workaround2-pin-pytorch-lightning": OldHook,
        "workaround2-pin-lightning": OldHook,
        "deadend1-rename-keeping-outputs": Renamed,
        "control-no-epoch-end": Base,
    }


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if device != "cpu" or precision != "fp32":
        raise Unsupported("the hook's removal does not depend on the device: cpu, fp32 only")
    pl = import_lightning("pytorch")
    torch.manual_seed(0)
    x = torch.randn(BATCHES * 4, 4)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4
    )
    model = _modules(pl)[variant]()
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
    if variant != "control-no-epoch-end":
        losses = model.epoch_losses or []
        checks["epoch_end_saw_every_step"] = {
            "ok": len(losses) == BATCHES and finite(losses)["ok"],
            "detail": "the epoch-end code saw %d of %d step losses: %s"
            % (len(losses), BATCHES, losses),
        }
    return checks


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
