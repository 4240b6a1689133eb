"""What a run costs, through the CLI users type, on a copy of this project: warm worker
(isolation "fork") against a fresh interpreter per job (isolation "process").

    python benchmarks/bench_run.py [--quick] [--envs-dir DIR]

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
of matrix.yaml and repros/, with its own record file, read back through the store's own
reader (Store, Record): a record the store refuses, or a change of the record's fields,
stops the benchmark with the store's message instead of measuring the wrong thing. The
environments are the shared ones (--envs-dir, else HARNESS_ENVS_DIR, else the checkout's
.envs: where `nox -s matrix` builds them), which must already be built.

--quick (what CI runs, after its `nox -s matrix -- --machine ci-smoke` step): the `smoke`
profile's environments that are built, instead of the `cpu` profile's, in all three parts;
a minute or two. The targets are printed, never enforced: the exit status is not zero only
when a run fails or its records cannot be read, so noise cannot fail CI, a breakage does.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout: its harness

from harness.config import Config  # noqa: E402
from harness.envs.backends import MARKER  # noqa: E402
from harness.spec.matrix import load_matrix  # noqa: E402
from harness.store.jsonl import LoadResult, Store, parse_bytes  # noqa: E402
from harness.store.records import Record  # noqa: E402

__all__ = ["main"]

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


def read_records(where: str, result: LoadResult) -> list[Record]:
    """The records the store's reader gave, or the benchmark stops naming what it refused
    (a schema the store no longer reads, a field it does not know)."""
    if result.warnings or result.refused:
        sys.exit(f"{where}: the store refused records:\n" + "\n".join(result.warnings))
    if not result.records:
        sys.exit(f"{where}: no records")
    return result.records


def harness(copy: Path, machine: str, *args: str) -> tuple[float, str, list[Record]]:
    """One CLI run into a fresh record file: (wall seconds, its output, its records)."""
    records_dir = copy / "results" / "records"
    for old in records_dir.glob("*.jsonl"):
        old.unlink()  # the store reads the folder: only this run's file is in it
    argv = [sys.executable, "-m", "harness", "--repo", str(copy), "run", "--no-report"]
    argv += ["--machine", machine, *args]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    records = read_records(f"{machine}.jsonl", Store(records_dir, machine).load())
    return wall, done.stdout, records


def overhead(records: list[Record]) -> float:
    return statistics.median(r.duration_s - (r.run_s or 0.0) for r in records)


def own_time(records: list[Record]) -> float:
    return sum(r.run_s or 0.0 for r in records)


def committed_envs() -> list[str]:
    """The environments of the committed cpu-profile records, read by the store's reader."""
    result = LoadResult()
    parse_bytes(BEFORE.read_bytes(), BEFORE, result)
    return sorted({r.env for r in read_records(str(BEFORE), result)})


def built_envs(envs_dir: Path, profile: str) -> list[str]:
    """The environments of ``profile`` that are built in ``envs_dir`` (their marker, which
    a build writes last, is there), in matrix.yaml's order."""
    expansion = load_matrix(REPO / "matrix.yaml").expand(profile)
    return [e.id for e in expansion.environments if (envs_dir / e.id / MARKER).is_file()]


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
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the smoke profile's built environments (what CI builds): a minute or two",
    )
    ap.add_argument(
        "--envs-dir",
        type=Path,
        help="the built environments (default: HARNESS_ENVS_DIR, else the checkout's .envs)",
    )
    args = ap.parse_args(argv)
    envs_dir = (args.envs_dir or Config(repo=REPO).envs_dir).resolve()
    profile = "smoke" if args.quick else "cpu"
    if args.quick:
        envs = built_envs(envs_dir, profile)
        if not envs:
            sys.exit(
                f"{envs_dir}: none of the smoke profile's environments is built "
                "(`nox -s matrix` or `python -m harness envs build` builds them)"
            )
    else:
        envs = committed_envs()
    # part 1 in the newest torch, or (--quick) the last built environment of the profile
    newest = NEWEST if NEWEST in envs else envs[-1]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        copy = Path(tmp)
        shutil.copy(REPO / "matrix.yaml", copy / "matrix.yaml")
        shutil.copytree(REPO / "repros", copy / "repros")
        (copy / "results" / "records").mkdir(parents=True)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
        print(f"profile {profile}, environments in {envs_dir}: {', '.join(envs)}")
        common = ("--profile", profile, "--envs-dir", str(envs_dir), *ONLY_SEEDS)

        # 1. per-variant overhead, the newest torch, fp32 cells: warm vs fresh
        cells = (*common, "--cell", f"{newest}-cpu-fp32", "-j", "1")
        _, _, fresh = harness(copy, "fresh", *cells, "--isolation", "process")
        _, _, warm = harness(copy, "warm", *cells, "--isolation", "fork")
        same = sorted((r.variant, r.outcome) for r in fresh) == sorted(
            (r.variant, r.outcome) for r in warm
        )
        f_over, w_over = overhead(fresh), overhead(warm)
        print(f"\n1. per-variant overhead, {newest} fp32, {len(warm)} jobs, -j 1")
        print("   (job wall time seen by the harness minus time inside run(), median)")
        print(f"   fresh interpreter: {f_over:7.3f} s   (median job {_median_dur(fresh):.3f} s)")
        print(f"   warm worker:       {w_over:7.3f} s   (median job {_median_dur(warm):.3f} s)")
        print(
            f"   ratio: {f_over / w_over:.1f}x less (target >= 20x); warm "
            f"{'<=' if w_over <= 0.1 else '>'} 0.1 s a variant (target <= 0.1 s); "
            f"outcomes {'equal' if same else 'DIFFER'}"
        )

        # 2. and 3. the profile end to end, one worker and two
        select = [*common, "--isolation", "fork", "--trials", "1"]
        for env in envs:
            select += ["--env", env]
        one_wall, one_out, one = harness(copy, "warm-j1", *select, "-j", "1")
        two_wall, _, two = harness(copy, "warm-j2", *select, "-j", "2")
        imported = imports(one_out)
        limit = sum(imported.values()) + own_time(one)
        ran_in = len({r.env for r in one})
        print(
            f"\n2. warm `{profile}` profile end to end, -j 1: {len(one)} jobs in {ran_in} environments"
        )
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
        print(
            f"\nload average at the end: {os.getloadavg()[0]:.1f}; "
            f"the benchmark took {time.monotonic() - started:.0f} s"
        )
    return 0


def _median_dur(records: list[Record]) -> float:
    return statistics.median(r.duration_s for r in records)


if __name__ == "__main__":
    sys.exit(main())
