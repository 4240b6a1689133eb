"""What the user asked for: paths, filters, parallelism, limits."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Config"]


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
    machine: str | None = None  # name of this machine's record file; None: host name
    matrix_file: str = "matrix.yaml"
    # plan: how many CI jobs, named "<machine_prefix>-<k>", printed as a GitHub matrix
    fan_out_shards: int = 4
    machine_prefix: str | None = None  # None: "ci-<profile>"
    github: bool = False
    envs_root: str | None = None
    python: str | None = None  # run --python: an existing interpreter instead of the rows
    isolation: str | None = None  # "fork" | "process"; None: fork where available

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
