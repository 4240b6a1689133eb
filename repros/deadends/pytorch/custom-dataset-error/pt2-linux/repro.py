"""Reproducer: "__getitem__ returned wrong type from Dataset"
(deadends/pytorch/custom-dataset-error/pt2-linux).

A custom Dataset whose __getitem__ returns a record object (as a project might return its
own Sample class) batched by a DataLoader with the default collate, then one training step.
Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/custom-dataset-error/pt2-linux).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

N, F, BATCH = 12, 3, 4


class Sample:
    def __init__(self, features, target):
        self.features = features
        self.target = target


def unreadable(i):
    return i % 5 == 3  # rows 3 and 8 "cannot be read"


class Records(Dataset):
    def __init__(self, x, y, mode):
        self.x, self.y, self.mode = x, y, mode
        # the map-style contract kept whole: only the rows that can be read are the dataset
        self.rows = [i for i in range(len(x)) if not unreadable(i)] if mode == "readable" else None

    def __len__(self):
        return len(self.x) if self.rows is None else len(self.rows)

    def __getitem__(self, i):
        if self.rows is not None:
            return self.x[self.rows[i]], self.y[self.rows[i]]
        if self.mode == "object":
            return Sample(self.x[i], self.y[i])
        if self.mode == "none":
            return None if unreadable(i) else (self.x[i], self.y[i])
        if self.mode == "lists":
            return self.x[i].tolist(), float(self.y[i])
        return self.x[i], self.y[i]


def train(device, dataset, **loader_options) -> dict:
    """One epoch over DataLoader(dataset(x, y), batch_size=BATCH, **loader_options)."""
    torch.manual_seed(0)
    x = torch.randn(N, F)
    y = torch.randn(N)
    data = dataset(x, y)
    loader = DataLoader(data, batch_size=BATCH, **loader_options)
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
    n = len(data)
    want = [((min(BATCH, n - i), F), (min(BATCH, n - i),)) for i in range(0, n, BATCH)]
    return {
        "batches_are_tensors_of_the_right_shape": {
            "ok": shapes == want,
            "detail": "batch (features, target) shapes %s; expected %s" % (shapes, want),
        },
        "every_sample_trained": {
            "ok": seen == n,
            "detail": "%d of the dataset's %d samples reached the model" % (seen, n),
        },
    }


def records(mode):
    return lambda x, y: Records(x, y, mode)


def baseline_record_object(device, precision):
    return train(device, records("object"))


def baseline_none_for_bad_rows(device, precision):
    return train(device, records("none"))


def workaround1_tuple_of_tensors(device, precision):
    return train(device, records("tensors"))


def workaround2_full_interface(device, precision):
    # the none-for-bad-rows case with the contract kept: __len__ counts the readable rows
    return train(device, records("readable"))


def deadend1_python_lists(device, precision):
    return train(device, records("lists"))


def deadend2_identity_collate(device, precision):
    return train(device, records("object"), collate_fn=lambda batch: batch)


def control_tensor_dataset(device, precision):
    return train(device, torch.utils.data.TensorDataset)


VARIANTS = {
    "baseline-record-object": baseline_record_object,
    "baseline-none-for-bad-rows": baseline_none_for_bad_rows,
    "workaround1-tuple-of-tensors": workaround1_tuple_of_tensors,
    "workaround2-full-interface": workaround2_full_interface,
    "deadend1-python-lists": deadend1_python_lists,
    "deadend2-identity-collate": deadend2_identity_collate,
    "control-tensor-dataset": control_tensor_dataset,
}
