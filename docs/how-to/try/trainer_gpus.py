# weecology/DeepForest-pytorch#83 (https://github.com/weecology/DeepForest-pytorch/issues/83):
# "__init__() got an unexpected keyword argument 'gpus'", "brand new from pytorch lightning
# 2.0": Lightning 2.0.0 removed Trainer(gpus=...) in favour of accelerator= and devices=.
import lightning.pytorch as pl

trainer = pl.Trainer(gpus=0, max_epochs=1, logger=False, enable_checkpointing=False)
print("Trainer built:", type(trainer).__name__)
