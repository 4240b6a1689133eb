"""Reproducer: "RuntimeError: NCCL error: invalid argument - ncclInvalidArgument"
(deadends/cuda/nccl-init-rank-mismatch/torch2-multi-gpu).

A process group asked for with a rank outside [0, world_size): the communicator refuses the
configuration when it is created. On a CUDA device the communicator is NCCL's own
(``torch.cuda.nccl.init_rank(world_size, uid, rank)``, the ncclCommInitRank every NCCL
process group calls), which rejects rank 1 of a world of 1 with ncclInvalidArgument; one GPU
holds one NCCL rank, so the one-GPU machine can only ask for that rank, never disagree
across two. On the CPU the same misconfigured ``init_process_group`` on the gloo backend is
refused the same way, by gloo's own check (its words: "rank < size"): the CPU twin.
The workarounds launch consistently configured groups (two gloo ranks on the CPU, by hand
and by torchrun; the one NCCL rank a single GPU holds) and check an all_reduce's sum.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import textwrap

import torch
from reprokit import Unsupported, time_left

_FAILURE_LINE = re.compile(r"Fatal Python error|\w+Error\b|Segmentation fault|Traceback")
_TIMEOUT_S = 120  # a launch that has not finished by then is stuck, not slow

# the script each launched rank runs: its group from the environment a launcher sets
_WORKER = textwrap.dedent(
    """
    import json, os, sys
    import torch
    import torch.distributed as dist
    backend, out = sys.argv[1], sys.argv[2]
    dist.init_process_group(backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    device = "cuda" if backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value)
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "size": size, "sum": value.item()}, f)
    dist.destroy_process_group()
    """
)


def expected_sum(world_size):
    """What an all_reduce (SUM) of rank + 1 over every rank gives."""
    return float(world_size * (world_size + 1) // 2)


def group_checks(rank, world_size, reports):
    """Postconditions on what each rank reported ({rank, size, sum}): every rank of the
    asked-for world answered, each its own rank, the world's size, and the all_reduce's sum."""
    want = expected_sum(world_size)
    ranks = sorted(r["rank"] for r in reports)
    sizes = sorted({r["size"] for r in reports})
    sums = sorted({r["sum"] for r in reports})
    return {
        "every_rank_joined": {
            "ok": ranks == list(range(world_size)) and sizes == [world_size],
            "detail": "ranks %s of world sizes %s answered; asked for rank %s of %d"
            % (ranks, sizes, rank, world_size),
        },
        "all_reduce_sum": {
            "ok": sums == [want],
            "detail": "all_reduce of rank + 1 gave %s; %s expected" % (sums, want),
        },
    }


def _precondition(device, precision):
    if precision != "fp32":
        raise Unsupported("a group's rank and size do not depend on precision: fp32 only")
    import torch.distributed as dist

    if not dist.is_available():
        raise Unsupported("this torch is built without torch.distributed")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise Unsupported("no CUDA device")
        if not dist.is_nccl_available() or not hasattr(torch._C, "_nccl_init_rank"):
            raise Unsupported("this torch is built without NCCL")
    elif not dist.is_gloo_available():
        raise Unsupported("this torch is built without gloo")


def in_process(device, rank, world_size):
    """One process asks for ``rank`` of ``world_size``: on cuda NCCL's communicator is made
    for it (then used by an all_reduce through a process group where it is rank 0 of 1), on
    cpu a gloo process group (a file store: no other process to wait for)."""
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(0)
        from torch.cuda import nccl

        nccl.init_rank(world_size, nccl.unique_id(), rank)  # ncclCommInitRank
        if not 0 <= rank < world_size:
            # accepted: a process group on it would wait for a rank 0 that never comes
            return {
                "every_rank_joined": {
                    "ok": False,
                    "detail": "NCCL made a communicator for rank %d of %d" % (rank, world_size),
                }
            }
    folder = tempfile.mkdtemp(prefix="kb-nccl-rank-")
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        init_method="file://" + os.path.join(folder, "store"),
        rank=rank,
        world_size=world_size,
    )
    try:
        value = torch.tensor([float(dist.get_rank() + 1)], device=device)
        dist.all_reduce(value)
        report = {"rank": dist.get_rank(), "size": dist.get_world_size(), "sum": value.item()}
    finally:
        dist.destroy_process_group()
    return group_checks(rank, world_size, [report])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_error(stderr):
    """The line of a failed process's stderr that names its failure (else its last line)."""
    lines = [x.strip() for x in stderr.decode(errors="replace").splitlines() if x.strip()]
    for line in lines:
        if _FAILURE_LINE.search(line):
            return line
    return lines[-1] if lines else "(no output)"


def _collect(folder, procs):
    """Wait for the launched processes: what each rank reported, and the failures of the
    processes that did not exit 0 (rc and the line naming the failure)."""
    failures = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=time_left(_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        if p.returncode != 0:
            failures.append("rc %s: %s" % (p.returncode, _first_error(err)))
    reports = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                reports.append(json.load(f))
    return reports, failures


def exit_check(failures):
    """Postcondition: every launched process (the ranks, torchrun's agent) exited 0."""
    return {
        "launch_exited_cleanly": {
            "ok": not failures,
            "detail": "; ".join(failures) if failures else "every launched process exited 0",
        }
    }


def launched(device, how):
    """The group launched with a consistent configuration: ``how`` is "by-hand" (each
    process given its own RANK in [0, WORLD_SIZE), WORLD_SIZE the number of processes) or
    "torchrun" (torch.distributed.run sets them). Two gloo ranks on cpu; on cuda the one
    NCCL rank a single GPU holds."""
    world_size = 1 if device == "cuda" else 2
    backend = "nccl" if device == "cuda" else "gloo"
    folder = tempfile.mkdtemp(prefix="kb-nccl-launch-")
    worker = os.path.join(folder, "worker.py")
    with open(worker, "w") as f:
        f.write(_WORKER)
    env = dict(os.environ)
    if how == "by-hand":
        # this process is rank 0 (torch is imported already), one child per other rank
        import torch.distributed as dist

        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
        env["WORLD_SIZE"] = str(world_size)
        procs = [
            subprocess.Popen(
                [sys.executable, worker, backend, folder],
                env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for rank in range(1, world_size)
        ]
        os.environ.update(env, RANK="0", LOCAL_RANK="0")
        # a child that dies before joining must not leave this rank waiting 30 minutes
        dist.init_process_group(
            backend,
            init_method="env://",
            timeout=datetime.timedelta(seconds=time_left(_TIMEOUT_S, margin_s=30)),
        )
        try:
            value = torch.tensor([float(dist.get_rank() + 1)], device=device)
            dist.all_reduce(value)
            mine = {"rank": dist.get_rank(), "size": dist.get_world_size(), "sum": value.item()}
        finally:
            dist.destroy_process_group()
        reports, failures = _collect(folder, procs)
        reports = [mine] + reports
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=1",
            "--nproc_per_node=%d" % world_size,
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % _free_port(),
            worker,
            backend,
            folder,
        ]
        launcher = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        reports, failures = _collect(folder, [launcher])
    checks = group_checks("0..%d" % (world_size - 1), world_size, reports)
    checks.update(exit_check(failures))
    return checks


def baseline_rank_out_of_range(device, precision):
    _precondition(device, precision)
    return in_process(device, rank=1, world_size=1)


def workaround1_consistent_rank_world_size(device, precision):
    _precondition(device, precision)
    return launched(device, "by-hand")


def workaround2_torchrun(device, precision):
    _precondition(device, precision)
    return launched(device, "torchrun")


def deadend1_nccl_debug_info(device, precision):
    _precondition(device, precision)
    # read by NCCL when it first initialises: this variant runs in a fresh interpreter
    os.environ["NCCL_DEBUG"] = "INFO"
    return in_process(device, rank=1, world_size=1)


def control_rank_in_range(device, precision):
    _precondition(device, precision)
    return in_process(device, rank=0, world_size=1)


VARIANTS = {
    "baseline-rank-out-of-range": baseline_rank_out_of_range,
    "workaround1-consistent-rank-world-size": workaround1_consistent_rank_world_size,
    "workaround2-torchrun": workaround2_torchrun,
    "deadend1-nccl-debug-info": deadend1_nccl_debug_info,
    "control-rank-in-range": control_rank_in_range,
}
