"""What a run costs, through the CLI users type, on a copy of this project: warm worker
(isolation "fork") against a fresh interpreter per job (isolation "process").

    HARNESS_ENVS_DIR=/work/envs python benchmarks/bench_run.py [--quick]

Prints, side by side, in one run:
 1. per-variant overhead in the torch 2.13.0 environment, on the seed entries (fp32 cells
    of the `cpu` profile): a job's wall time seen by the harness minus the time spent in
    the reproducer's run() (``duration_s - run_s`` of each record), median over jobs,
    warm vs fresh (targets: at least 20x less, at most 0.1 s);
 2. the warm `cpu` profile on the seed entries (every environment of the committed records,
    results/records/vm.jsonl, one trial) end to end with one worker (-j 1) against its
    limit: one import per environment (the warm worker's own import time, printed by the
    run) plus
    the variants' own time measured inside the children (the records' run_s) (target:
    within 1.3x);
 3. the same profile with two workers (-j 2) against one (target: at least 1.7x).
Each run is `python -m harness --repo COPY run ...` in a subprocess on a temporary copy
of matrix.yaml and repros/, with its own record file; the environments are the shared
ones (HARNESS_ENVS_DIR), which must already be built. --quick limits parts 2 and 3 to
three environments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
NEWEST = "py3.11-torch2.13.0-lightning2.6.6"
# the environments of the committed cpu-profile records
BEFORE = REPO / "results" / "records" / "vm.jsonl"
# the two seed entries: the benchmark measures the harness, not the knowledge-base domain
# (whose torch.compile entry alone spends 20-40 s inside each run)
SEEDS = (
    "pytorch/grad-scale-unscale-error",
    "lightning/gradient-clipping-optimizer-handles-unscaling",
)
ONLY_SEEDS = tuple(arg for seed in SEEDS for arg in ("--entry", seed))
QUICK_ENVS = ("py3.9-torch1.10.2-lightning1.9.5", "py3.11-torch2.1.2-lightning2.4.0", NEWEST)


def harness(copy: Path, machine: str, *args: str) -> tuple[float, str, list[dict[str, Any]]]:
    """One CLI run into a fresh record file: (wall seconds, its output, its records)."""
    store = copy / "results" / "records" / f"{machine}.jsonl"
    store.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "harness", "--repo", str(copy), "run", "--no-report"]
    argv += ["--machine", machine, *args]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    records = [json.loads(line) for line in store.read_text().splitlines()]
    return wall, done.stdout, records


def overhead(records: list[dict[str, Any]]) -> float:
    return statistics.median(r["duration_s"] - (r["run_s"] or 0.0) for r in records)


def own_time(records: list[dict[str, Any]]) -> float:
    return sum(r["run_s"] or 0.0 for r in records)


def imports(output: str) -> dict[str, float]:
    """The warm worker's import time per environment, as the run printed it."""
    found: dict[str, float] = {}
    env = ""
    for line in output.splitlines():
        m = re.match(r"environment (\S+): \d+ jobs", line)
        if m:
            env = m.group(1)
        m = re.search(r"warm worker imported in ([0-9.]+) s", line)
        if m and env:
            found[env] = float(m.group(1))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="parts 2 and 3 on three environments")
    args = ap.parse_args(argv)
    if not os.environ.get("HARNESS_ENVS_DIR"):
        sys.exit("set HARNESS_ENVS_DIR to the folder of built environments (e.g. /work/envs)")
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        copy = Path(tmp)
        shutil.copy(REPO / "matrix.yaml", copy / "matrix.yaml")
        shutil.copytree(REPO / "repros", copy / "repros")
        (copy / "results" / "records").mkdir(parents=True)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")

        # 1. per-variant overhead, torch 2.13.0, fp32 cells: warm vs fresh
        cells = ("--profile", "cpu", *ONLY_SEEDS, "--cell", f"{NEWEST}-cpu-fp32", "-j", "1")
        _, _, fresh = harness(copy, "fresh", *cells, "--isolation", "process")
        _, _, warm = harness(copy, "warm", *cells, "--isolation", "fork")
        same = sorted((r["variant"], r["outcome"]) for r in fresh) == sorted(
            (r["variant"], r["outcome"]) for r in warm
        )
        f_over, w_over = overhead(fresh), overhead(warm)
        print(f"\n1. per-variant overhead, {NEWEST} fp32, {len(warm)} jobs, -j 1")
        print("   (job wall time seen by the harness minus time inside run(), median)")
        print(f"   fresh interpreter: {f_over:7.3f} s   (median job {_median_dur(fresh):.3f} s)")
        print(f"   warm worker:       {w_over:7.3f} s   (median job {_median_dur(warm):.3f} s)")
        print(
            f"   ratio: {f_over / w_over:.1f}x less (target >= 20x); warm "
            f"{'<=' if w_over <= 0.1 else '>'} 0.1 s a variant (target <= 0.1 s); "
            f"outcomes {'equal' if same else 'DIFFER'}"
        )

        # 2. and 3. the cpu profile end to end, one worker and two
        select = ["--profile", "cpu", *ONLY_SEEDS, "--isolation", "fork", "--trials", "1"]
        envs_before = sorted({json.loads(line)["env"] for line in BEFORE.read_text().splitlines()})
        for env in QUICK_ENVS if args.quick else envs_before:
            select += ["--env", env]
        one_wall, one_out, one = harness(copy, "warm-j1", *select, "-j", "1")
        two_wall, _, two = harness(copy, "warm-j2", *select, "-j", "2")
        imported = imports(one_out)
        limit = sum(imported.values()) + own_time(one)
        envs = len({r["env"] for r in one})
        print(f"\n2. warm `cpu` profile end to end, -j 1: {len(one)} jobs in {envs} environments")
        print(
            f"   one import per environment: {sum(imported.values()):7.1f} s ({len(imported)} imports)"
        )
        print(f"   variants' own time (run_s): {own_time(one):7.1f} s")
        print(f"   limit:                      {limit:7.1f} s")
        print(
            f"   measured:                   {one_wall:7.1f} s = {one_wall / limit:.2f}x the limit"
        )
        print("   (target: within 1.3x)")
        print(f"\n3. two workers vs one ({len(two)} jobs)")
        print(
            f"   -j 1: {one_wall:7.1f} s   -j 2: {two_wall:7.1f} s   = {one_wall / two_wall:.2f}x"
        )
        print("   (target: at least 1.7x)")
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


def _median_dur(records: list[dict[str, Any]]) -> float:
    return statistics.median(r["duration_s"] for r in records)


if __name__ == "__main__":
    sys.exit(main())
