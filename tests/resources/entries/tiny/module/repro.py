"""A reproducer that only works as a real module: a dataclass under postponed annotations
(dataclasses looks its module up in sys.modules), objects pickled by class name (pickle,
torch.save, a DataLoader worker sending its samples back)."""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass


@dataclass
class Config:
    lr: float = 0.1
    steps: int = 3


class Sample:
    def __init__(self, index: int) -> None:
        self.index = index


class Samples:
    """A map-style dataset (DataLoader takes any object with __len__ and __getitem__)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Sample:
        return Sample(i)  # sent back from a worker process: pickled by its class's name


def same(got, want, what: str) -> dict:
    return {"ok": got == want, "detail": "%s: %r, expected %r" % (what, got, want)}


def dataclass_config(device, precision):
    return {"config": same(Config(steps=5), Config(0.1, 5), "Config(steps=5)")}


def pickle_config(device, precision):
    config = Config(lr=0.5)
    return {"roundtrip": same(pickle.loads(pickle.dumps(config)), config, "pickled Config")}


def torch_save_config(device, precision):
    import torch

    buffer = io.BytesIO()
    torch.save({"config": Config(steps=7)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)["config"]
    return {"roundtrip": same(loaded, Config(steps=7), "torch.save/torch.load of a Config")}


def dataloader_workers(device, precision):
    import torch

    loader = torch.utils.data.DataLoader(Samples(), batch_size=2, num_workers=2, collate_fn=list)
    got = sorted(s.index for batch in loader for s in batch)
    return {"every_sample": same(got, list(range(8)), "sample indices from 2 workers")}


VARIANTS = {
    "dataclass": dataclass_config,
    "pickle": pickle_config,
    "torch-save": torch_save_config,
    "dataloader": dataloader_workers,
    "todo": None,
}
