# acids-ircam/RAVE#219 (https://github.com/acids-ircam/RAVE/issues/219): "NotImplementedError:
# Support for `validation_epoch_end` has been removed in v2.0.0." Lightning 2.0.0 removed the
# *_epoch_end hooks; the project pinned lightning 1.9 until its code moved to
# on_validation_epoch_end.
import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        (x,) = batch
        return self.layer(x).sum()

    def validation_step(self, batch, batch_idx):
        (x,) = batch
        return self.layer(x).sum()

    def validation_epoch_end(self, outputs):
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)
trainer = pl.Trainer(
    max_epochs=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Model(), data, data)
print("fit done")
