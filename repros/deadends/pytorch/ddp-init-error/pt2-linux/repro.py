"""Reproducer: "DDP initialization failed: NCCL error" (deadends/pytorch/ddp-init-error/pt2-linux).

One process (world size 1) initialises an NCCL process group and takes a
DistributedDataParallel training step on the GPU, the smallest DDP run there is. The baseline
initialises it the way a script run with plain `python` does, without the rendezvous
variables a launcher sets. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/ddp-init-error/pt2-linux). NCCL needs CUDA:
the NCCL variants run in CUDA cells; the control (the same with gloo on the CPU) runs anywhere.

    python repro.py --list
    python repro.py --variant baseline-no-rendezvous-env --device cuda --precision fp32
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-no-rendezvous-env": "init_process_group('nccl', rank=0, world_size=1) with MASTER_ADDR/MASTER_PORT unset",
    "workaround1-master-addr-port": "MASTER_ADDR=127.0.0.1 and a free MASTER_PORT set before init_process_group('nccl')",
    "workaround2-torchrun": "the training step launched by torchrun (python -m torch.distributed.run --nproc_per_node 1)",
    "deadend1-data-parallel": "nn.DataParallel instead of DDP, no process group",
    "deadend2-single-gpu": "no distribution at all: the model on one GPU",
    "control-gloo": "MASTER_ADDR/MASTER_PORT set, init_process_group('gloo') and a DDP step on the cell's device",
}
NOT_WRITTEN = []

RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(model, device):
    torch.manual_seed(0)
    x = torch.randn(16, 8, device=device)
    y = torch.randn(16, 1, device=device)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
    moved = [(p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before)]
    return loss.item(), moved


def ddp_step(backend, device):
    """Initialise from the environment (env://), one DDP step, tear down."""
    import torch.distributed as dist

    if not dist.is_available():
        raise Unsupported("torch.distributed is not available in this build")
    kwargs = {
        "rank": int(os.environ.get("RANK", 0)),
        "world_size": int(os.environ.get("WORLD_SIZE", 1)),
    }
    dist.init_process_group(backend, **kwargs)
    try:
        model = nn.Linear(8, 1).to(device)
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[0] if device == "cuda" else None
        )
        return step(ddp, device)
    finally:
        dist.destroy_process_group()


def checks(loss, moved, where):
    return {
        "trained": {
            "ok": loss == loss and bool(moved) and all(m > 0 for m in moved),
            "detail": "loss %s, max |change| per parameter %s (%s)" % (loss, moved, where),
        }
    }


def run(variant: str, device: str = "cuda", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("process-group set-up does not depend on precision: run fp32 only")
    if variant != "control-gloo" and device != "cuda":
        raise Unsupported("NCCL and DataParallel need a CUDA device; this cell is %s" % device)
    saved = {k: os.environ.pop(k) for k in RENDEZVOUS if k in os.environ}
    try:
        if variant == "baseline-no-rendezvous-env":
            return checks(*ddp_step("nccl", device), where="nccl, env:// without its variables")
        if variant in ("workaround1-master-addr-port", "control-gloo"):
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
            backend = "gloo" if variant == "control-gloo" else "nccl"
            return checks(*ddp_step(backend, device), where=backend)
        if variant == "workaround2-torchrun":
            return torchrun(device)
        if variant == "deadend1-data-parallel":
            return checks(
                *step(nn.DataParallel(nn.Linear(8, 1).to(device)), device), where="DataParallel"
            )
        return checks(*step(nn.Linear(8, 1).to(device), device), where="one GPU, no distribution")
    finally:
        for k in RENDEZVOUS:
            os.environ.pop(k, None)
        os.environ.update(saved)


def torchrun(device):
    out = tempfile.mktemp(prefix="kb-ddp-", suffix=".json")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "1",
        "--master_port",
        str(free_port()),
        os.path.abspath(__file__),
        "--torchrun-worker",
        device,
        out,
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    text = proc.stdout.decode("utf-8", "replace")
    if not os.path.exists(out):
        # the worker's own exception, as torchrun printed it, is what the run measured
        last = [line for line in text.splitlines() if "Error" in line or "error" in line]
        raise RuntimeError(
            "torchrun exited %d: %s"
            % (proc.returncode, (last[-1] if last else text[-2000:]).strip())
        )
    with open(out) as f:
        result = json.load(f)
    os.remove(out)
    return checks(result["loss"], result["moved"], where="nccl under torchrun")


def torchrun_worker(device, out):
    loss, moved = ddp_step("nccl", device)
    with open(out, "w") as f:
        json.dump({"loss": loss, "moved": moved}, f)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--torchrun-worker":
        torchrun_worker(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
