"""Reproducer: "DataLoader worker (pid(s) ...) exited unexpectedly: OSError: [Errno 9] Bad file
descriptor" (deadends/pytorch/dataloader-bad-file-descriptor/torch2-linux).

A Dataset that opens its data file once in __init__ and reads records from that shared handle
(seek + read) in __getitem__, loaded by a DataLoader with two worker processes over two
epochs: the cause the knowledge-base entry names
(https://deadends.dev/pytorch/dataloader-bad-file-descriptor/torch2-linux). Each variant
applies one of its workarounds or dead ends; every record read must be the one asked for.

    python repro.py --list
    python repro.py --variant baseline-file-opened-in-init --device cpu --precision fp32
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-file-opened-in-init": "file opened in __init__, read in __getitem__ by 2 forked workers",
    "workaround1-open-lazily": "the file opened in __getitem__ (once per worker process), not in __init__",
    "workaround2-spawn": "multiprocessing_context='spawn' for the workers, file still opened in __init__",
    "workaround3-persistent-workers": "persistent_workers=True, file still opened in __init__",
    "deadend1-num-workers-0": "num_workers=0: records read in the main process",
    "deadend2-raise-nofile-limit": "RLIMIT_NOFILE raised to its hard limit before loading",
    "control-in-memory": "records held in memory (no file), 2 workers",
}
NOT_WRITTEN = []

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
        if self.mode == "memory":
            return torch.tensor(struct.unpack_from("<q", self.memory, i * RECORD)[0])
        if self.mode == "lazy" and self.handle_pid != os.getpid():
            self.handle = open(self.path, "rb")
            self.handle_pid = os.getpid()
        self.handle.seek(i * RECORD)
        return torch.tensor(struct.unpack("<q", self.handle.read(RECORD))[0])
"""


def dataset_module(folder):
    import importlib

    with open(os.path.join(folder, "kb_badfd_dataset.py"), "w") as f:
        f.write(DATASET_SOURCE % (N, RECORD))
    sys.path.insert(0, folder)
    sys.modules.pop("kb_badfd_dataset", None)
    return importlib.import_module("kb_badfd_dataset")


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32" or device != "cpu":
        raise Unsupported("data loading runs on the host: cpu-fp32 only")
    if variant == "workaround3-persistent-workers":
        import inspect

        if "persistent_workers" not in inspect.signature(DataLoader.__init__).parameters:
            raise Unsupported(
                "DataLoader has no persistent_workers argument in torch %s" % torch.__version__
            )
    folder = tempfile.mkdtemp(prefix="kb-badfd-")
    path = os.path.join(folder, "records.bin")
    with open(path, "wb") as f:
        for i in range(N):
            f.write(struct.pack("<q", 1000 + i))
    mode = {"workaround1-open-lazily": "lazy", "control-in-memory": "memory"}.get(variant, "init")
    data = dataset_module(folder).Records(path, mode)
    kwargs = {"num_workers": 0 if variant == "deadend1-num-workers-0" else 2}
    if variant == "workaround2-spawn":
        kwargs["multiprocessing_context"] = "spawn"
    if variant == "workaround3-persistent-workers":
        kwargs["persistent_workers"] = True
    if variant == "deadend2-raise-nofile-limit":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loader = DataLoader(
        data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0), **kwargs
    )
    epochs = []
    try:
        for _ in range(2):
            epochs.append(sorted(v for batch in loader for v in batch.tolist()))
    finally:
        if data.handle is not None:
            data.handle.close()
        sys.path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
    want = list(range(1000, 1000 + N))
    bad = [sorted(set(e) ^ set(want))[:5] for e in epochs]
    return {
        "every_record_once_per_epoch": {
            # a shuffled epoch reads each record exactly once: a record read at the wrong
            # offset (a handle's position moved by another process) shows as a duplicate
            "ok": len(epochs) == 2 and all(e == want for e in epochs),
            "detail": "records per epoch %s; values missing or extra (first 5): %s"
            % ([len(e) for e in epochs], bad),
        },
    }


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
