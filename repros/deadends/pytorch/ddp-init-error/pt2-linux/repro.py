"""Reproducer: "DDP initialization failed: NCCL error" (deadends/pytorch/ddp-init-error/pt2-linux).

One process (world size 1) initialises an NCCL process group and takes a
DistributedDataParallel training step on the GPU, the smallest DDP run there is. The baseline
initialises it the way a script run with plain `python` does, without the rendezvous
variables a launcher sets. Each variant applies one workaround or dead end of the
knowledge-base entry (https://deadends.dev/pytorch/ddp-init-error/pt2-linux). NCCL needs CUDA:
the NCCL variants run in CUDA cells; the control (the same with gloo on the CPU) runs anywhere.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile

import torch
from reprokit import Unsupported
from torch import nn

RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")
RENDEZVOUS_TIMEOUT_S = 60  # one process: a healthy rendezvous takes well under a second


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
        # a rendezvous that hangs (a port taken between free_port and the store's bind, a
        # peer that never comes) ends as torch's own timeout error, not at the run's limit
        "timeout": datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S),
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


def without_rendezvous(run):
    """``run()`` with the rendezvous variables unset, and set back as they were after it."""
    saved = {k: os.environ.pop(k) for k in RENDEZVOUS if k in os.environ}
    try:
        return run()
    finally:
        for k in RENDEZVOUS:
            os.environ.pop(k, None)
        os.environ.update(saved)


def rendezvous_then_ddp(backend, device):
    def run():
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        return checks(*ddp_step(backend, device), where=backend)

    return without_rendezvous(run)


def baseline_no_rendezvous_env(device, precision):
    return without_rendezvous(
        lambda: checks(*ddp_step("nccl", device), where="nccl, env:// without its variables")
    )


def workaround1_master_addr_port(device, precision):
    return rendezvous_then_ddp("nccl", device)


def workaround2_torchrun(device, precision):
    return without_rendezvous(lambda: torchrun(device))


def deadend1_data_parallel(device, precision):
    return without_rendezvous(
        lambda: checks(
            *step(nn.DataParallel(nn.Linear(8, 1).to(device)), device), where="DataParallel"
        )
    )


def deadend2_single_gpu(device, precision):
    return without_rendezvous(
        lambda: checks(*step(nn.Linear(8, 1).to(device), device), where="one GPU, no distribution")
    )


def control_gloo(device, precision):
    return rendezvous_then_ddp("gloo", device)


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
    env = dict(os.environ)
    kit = sys.modules.get("reprokit")
    if kit is not None:  # the worker, repro.py run as a script, imports the shared helpers too
        paths = [os.path.dirname(os.path.abspath(kit.__file__)), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, env=env
    )
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


VARIANTS = {
    "baseline-no-rendezvous-env": baseline_no_rendezvous_env,
    "workaround1-master-addr-port": workaround1_master_addr_port,
    "workaround2-torchrun": workaround2_torchrun,
    "deadend1-data-parallel": deadend1_data_parallel,
    "deadend2-single-gpu": deadend2_single_gpu,
    "control-gloo": control_gloo,
}

if __name__ == "__main__":  # repro.py run by torchrun as its worker (workaround2-torchrun)
    if len(sys.argv) == 4 and sys.argv[1] == "--torchrun-worker":
        torchrun_worker(sys.argv[2], sys.argv[3])
        sys.exit(0)
