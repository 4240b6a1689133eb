"""Reproducer: "DataLoader worker (pid(s) ...) exited unexpectedly: OSError: [Errno 9] Bad file
descriptor" (deadends/pytorch/dataloader-bad-file-descriptor/torch2-linux).

A Dataset that opens its data file once in __init__ and reads records from that shared handle
(seek + read) in __getitem__, loaded by a DataLoader with two worker processes over two
epochs: the cause the knowledge-base entry names
(https://deadends.dev/pytorch/dataloader-bad-file-descriptor/torch2-linux). Each variant
applies one of its workarounds or dead ends; every record read must be the one asked for.
Data loading runs on the host: entry.yaml runs it on cpu at fp32 only.
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import sys
import tempfile

import torch
from reprokit import Unsupported
from torch.utils.data import DataLoader

N, RECORD = 64, 8  # 64 records of one little-endian int64 each


# The Dataset lives in a real module file written at run time, as a project's would: worker
# processes started with 'spawn' import it by name.
DATASET_SOURCE = """
import os
import struct

import torch
from torch.utils.data import Dataset

N, RECORD = %d, %d


class Records(Dataset):
    def __init__(self, path, mode):
        self.path, self.mode = path, mode
        self.handle = None
        self.handle_pid = None
        if mode == "init":
            self.handle = open(path, "rb")
        self.memory = None
        if mode == "memory":
            with open(path, "rb") as f:
                self.memory = f.read()

    def __len__(self):
        return N

    def __getitem__(self, i):
        # (the record, the worker that read it: -1 for the main process)
        info = torch.utils.data.get_worker_info()
        worker = -1 if info is None else info.id
        if self.mode == "memory":
            return torch.tensor([struct.unpack_from("<q", self.memory, i * RECORD)[0], worker])
        if self.mode == "lazy" and self.handle_pid != os.getpid():
            self.handle = open(self.path, "rb")
            self.handle_pid = os.getpid()
        self.handle.seek(i * RECORD)
        return torch.tensor([struct.unpack("<q", self.handle.read(RECORD))[0], worker])
"""


def dataset_module(folder):
    import importlib

    with open(os.path.join(folder, "kb_badfd_dataset.py"), "w") as f:
        f.write(DATASET_SOURCE % (N, RECORD))
    sys.path.insert(0, folder)
    sys.modules.pop("kb_badfd_dataset", None)
    return importlib.import_module("kb_badfd_dataset")


def two_epochs(mode="init", num_workers=2, before=None, **loader_options) -> dict:
    """Two shuffled epochs of DataLoader(Records(path, ``mode``), num_workers=...,
    **loader_options); ``before()`` runs just before the loader is made."""
    folder = tempfile.mkdtemp(prefix="kb-badfd-")
    path = os.path.join(folder, "records.bin")
    with open(path, "wb") as f:
        for i in range(N):
            f.write(struct.pack("<q", 1000 + i))
    data = dataset_module(folder).Records(path, mode)
    if before is not None:
        before()
    loader = DataLoader(
        data,
        batch_size=4,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        num_workers=num_workers,
        **loader_options,
    )
    epochs = []
    workers = set()
    try:
        for _ in range(2):
            rows = [row for batch in loader for row in batch.tolist()]
            epochs.append(sorted(value for value, _ in rows))
            workers.update(worker for _, worker in rows)
    finally:
        if data.handle is not None:
            data.handle.close()
        sys.path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "every_record_once_per_epoch": every_record_once(epochs),
        # what the loader's workers are for: the records read in worker processes, in parallel
        "read_by_worker_processes": {
            "ok": bool(workers) and -1 not in workers and len(workers) == num_workers,
            "detail": "records read by workers %s (-1: the main process) of num_workers=%d"
            % (sorted(workers), num_workers),
        },
    }


def every_record_once(epochs) -> dict:
    """A shuffled epoch reads each record exactly once: a record read at the wrong offset
    (a handle's position moved by another process) shows as a duplicate."""
    want = list(range(1000, 1000 + N))
    bad = [sorted(set(e) ^ set(want))[:5] for e in epochs]
    return {
        "ok": len(epochs) == 2 and all(e == want for e in epochs),
        "detail": "records per epoch %s; values missing or extra (first 5): %s"
        % ([len(e) for e in epochs], bad),
    }


def baseline_file_opened_in_init(device, precision):
    return two_epochs()


def workaround1_open_lazily(device, precision):
    return two_epochs("lazy")


def workaround2_spawn(device, precision):
    return two_epochs(multiprocessing_context="spawn")


def workaround3_persistent_workers(device, precision):
    import inspect

    if "persistent_workers" not in inspect.signature(DataLoader.__init__).parameters:
        raise Unsupported(
            "DataLoader has no persistent_workers argument in torch %s" % torch.__version__
        )
    return two_epochs(persistent_workers=True)


def deadend1_num_workers_0(device, precision):
    return two_epochs(num_workers=0)


def deadend2_raise_nofile_limit(device, precision):
    def raise_limit():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    return two_epochs(before=raise_limit)


def control_in_memory(device, precision):
    return two_epochs("memory")


VARIANTS = {
    "baseline-file-opened-in-init": baseline_file_opened_in_init,
    "workaround1-open-lazily": workaround1_open_lazily,
    "workaround2-spawn": workaround2_spawn,
    "workaround3-persistent-workers": workaround3_persistent_workers,
    "deadend1-num-workers-0": deadend1_num_workers_0,
    "deadend2-raise-nofile-limit": deadend2_raise_nofile_limit,
    "control-in-memory": control_in_memory,
}
