"""Reproducer: "__getitem__ returned wrong type from Dataset"
(deadends/pytorch/custom-dataset-error/pt2-linux).

A custom Dataset whose __getitem__ returns a record object (as a project might return its
own Sample class) batched by a DataLoader with the default collate, then one training step.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/custom-dataset-error/pt2-linux).

    python repro.py --list
    python repro.py --variant baseline-record-object --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-record-object": "__getitem__ returns a Sample object holding features and target",
    "baseline-none-for-bad-rows": "__getitem__ returns None for rows it cannot read",
    "workaround1-tuple-of-tensors": "__getitem__ returns (features, target) as tensors",
    "workaround2-full-interface": "__len__ and __getitem__ both written to the map-style contract, returning tensors",
    "deadend1-python-lists": "__getitem__ returns (features as a Python list, target as a float)",
    "deadend2-identity-collate": "DataLoader(collate_fn=lambda batch: batch): no collation, the records reach the model",
    "control-tensor-dataset": "torch.utils.data.TensorDataset over the same data",
}
NOT_WRITTEN = []

N, F, BATCH = 12, 3, 4


class Sample:
    def __init__(self, features, target):
        self.features = features
        self.target = target


class Records(Dataset):
    def __init__(self, x, y, mode):
        self.x, self.y, self.mode = x, y, mode

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.mode == "object":
            return Sample(self.x[i], self.y[i])
        if self.mode == "none":
            return None if i % 5 == 3 else (self.x[i], self.y[i])  # rows 3 and 8 "cannot be read"
        if self.mode == "lists":
            return self.x[i].tolist(), float(self.y[i])
        return self.x[i], self.y[i]


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("batching does not depend on precision: run fp32 only")
    torch.manual_seed(0)
    x = torch.randn(N, F)
    y = torch.randn(N)
    mode = {
        "baseline-record-object": "object",
        "baseline-none-for-bad-rows": "none",
        "deadend1-python-lists": "lists",
        "deadend2-identity-collate": "object",
    }.get(variant, "tensors")
    data = (
        torch.utils.data.TensorDataset(x, y)
        if variant == "control-tensor-dataset"
        else Records(x, y, mode)
    )
    kwargs = {"collate_fn": (lambda batch: batch)} if variant == "deadend2-identity-collate" else {}
    loader = DataLoader(data, batch_size=BATCH, **kwargs)
    model = nn.Linear(F, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    shapes = []
    seen = 0
    for batch in loader:
        feats, target = batch
        shapes.append(
            (
                tuple(feats.shape) if hasattr(feats, "shape") else type(feats).__name__,
                tuple(target.shape) if hasattr(target, "shape") else type(target).__name__,
            )
        )
        loss = (model(feats.to(device)).squeeze(1) - target.to(device)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += feats.shape[0]
    want = [((BATCH, F), (BATCH,))] * (N // BATCH)
    return {
        "batches_are_tensors_of_the_right_shape": {
            "ok": shapes == want,
            "detail": "batch (features, target) shapes %s; expected %s" % (shapes, want),
        },
        "every_sample_trained": {
            "ok": seen == N,
            "detail": "%d of %d samples reached the model" % (seen, N),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
