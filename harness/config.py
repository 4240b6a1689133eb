"""What the user asked for: paths, filters, parallelism, limits."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RANGES", "Config", "out_of_range"]

# every number a user or matrix.yaml gives, with the range it must fall in (one home:
# the CLI, matrix.yaml's defaults and profiles all check against these)
RANGES: dict[str, tuple[float, float]] = {
    "trials": (1, 100),  # per cell: more belongs in repeated --resume runs
    "jobs": (1, 256),  # children at once
    "timeout_s": (0.1, 7 * 24 * 3600.0),  # seconds a run may take: up to a week
    "memory_limit_mb": (16, 4 * 1024 * 1024),  # per child: 16 MiB to 4 TiB
    "shards": (1, 1000),  # N of --shard K/N, plan --shards
    "lines": (1, 100_000),  # diff --limit
    "budget_s": (1, 7 * 24 * 3600.0),  # run/plan --budget: a window's seconds
    "cuda_start_s": (0, 600),  # --cuda-start-s: a child's CUDA context, estimated
}


def _shown(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def out_of_range(name: str, value: float) -> str | None:
    """Why ``value`` is not a valid ``name`` (not finite, or outside RANGES), or None."""
    low, high = (_shown(x) for x in RANGES[name])
    if value != value or value in (float("inf"), float("-inf")):
        return f"must be a finite number from {low} to {high}, got {value!r}"
    if not RANGES[name][0] <= value <= RANGES[name][1]:
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if len(shown) > 20:
            shown = f"a {len(shown)}-digit number"
        return f"must be from {low} to {high}, got {shown}"
    return None


# CUDA context creation in a fresh child: ~0.3-0.6 s for the primary context on a Hopper GPU
# with lazy module loading (CUDA 12.2+ default), plus the first cuBLAS/cuDNN handle and the
# first kernel launches, with up to -j children creating theirs at once on one GPU: 2 s is
# an upper estimate, so that the window is not overrun (measure it on the box and pass
# --cuda-start-s; harness/execute/budget.py uses it)
CUDA_START_S = 2.0


@dataclass
class Config:
    repo: Path
    profile: str | None = None
    resume: bool = False
    list_only: bool = False
    no_report: bool = False
    entries: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    envs: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    shard: tuple[int, int] = (1, 1)
    jobs: int = max(1, os.cpu_count() or 1)
    trials: int | None = None  # None: the profile's (or matrix.yaml's) trials
    timeout_s: float | None = None  # None: matrix.yaml's default
    memory_limit_mb: int | None = None  # None: matrix.yaml's default
    machine: str | None = None  # this machine's record file; None: host-<machine id> (provenance)
    matrix_file: str = "matrix.yaml"
    # plan: how many CI jobs, named "<machine_prefix>-<k>", printed as a GitHub matrix
    fan_out_shards: int = 4
    machine_prefix: str | None = None  # None: "ci-<profile>"
    github: bool = False
    envs_root: str | None = None
    python: str | None = None  # run --python: an existing interpreter instead of the rows
    isolation: str | None = None  # "fork" | "process"; None: fork where available
    # a full disk: stop the run (False), or record env_failed and go on (True)
    keep_going: bool = False
    # run --order value / --budget S (harness/execute/budget.py): the most valuable jobs
    # first, cut to what the stored durations say fits S seconds
    order: str = "plan"  # "plan" | "value"
    budget_s: float | None = None
    cuda_start_s: float | None = None  # None: CUDA_START_S
    # run --settle S (harness/execute/settle.py): extra trials for flaky cells and open
    # claims after the plan's jobs, for at most S seconds (and what is left of --budget)
    settle_s: float | None = None
    settle_only: bool = False  # run --settle-only: no plan job, only the extra trials

    @property
    def matrix_path(self) -> Path:
        return self.repo / self.matrix_file

    @property
    def repros_dir(self) -> Path:
        return self.repo / "repros"

    @property
    def results_dir(self) -> Path:
        return self.repo / "results"

    @property
    def records_dir(self) -> Path:
        return self.results_dir / "records"

    @property
    def envs_dir(self) -> Path:
        # environments live outside the results; HARNESS_ENVS_DIR puts them elsewhere
        return Path(self.envs_root or os.environ.get("HARNESS_ENVS_DIR") or self.repo / ".envs")
