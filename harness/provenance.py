"""Where a record was measured: the machine, its GPU/driver, the harness and its revision."""

from __future__ import annotations

import platform
import socket
import subprocess
from pathlib import Path

import harness

__all__ = ["machine_provenance"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def machine_provenance(repo: Path) -> dict[str, str]:
    gpu = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    names = sorted({line.split(",")[0].strip() for line in gpu.splitlines() if line.strip()})
    drivers = sorted({line.split(",")[1].strip() for line in gpu.splitlines() if "," in line})
    rev = _run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo)
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu_model(),
        "gpu": "; ".join(names) or "none",
        "driver": "; ".join(drivers) or "none",
        "harness_version": harness.__version__,
        "git_rev": (rev + ("-dirty" if dirty else "")) if rev else "unknown",
    }
