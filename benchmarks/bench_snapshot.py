"""Time the record snapshots (harness/store/snapshot.py): `python -m harness report`, and the
load alone (harness.store.columnar.load_latest), with no snapshot, with one and nothing appended,
and after appending records, in one run.

    python benchmarks/bench_snapshot.py --repo COPY [--append 1000] [--no-report]

COPY is a project folder with results/records/*.jsonl (e.g. a copy of the store that
benchmarks/bench_report.py writes): this script appends records to its largest record file
and deletes its results/.cache, so never point it at a store you keep. The appended
records are copies of the file's first lines, half started now (newer records of their
keys) and half of a new machine id (new keys). Every step runs as a subprocess,
as a user runs it; the plain read of the files (their bytes, once) is printed for scale.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOAD = """
import sys, time
from pathlib import Path
from harness.store.columnar import load_latest
from harness.store.snapshot import cache_dir
from harness.store.jsonl import Store
root = Path(sys.argv[1]) / "results" / "records"
t0 = time.perf_counter()
table = load_latest(Store(root), cache_dir(root) if sys.argv[2] == "1" else None)
print(f"{time.perf_counter() - t0:.3f} {len(table)} {table.python_lines}")
"""


def _run(cmd: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        sys.exit(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return wall, done.stdout


def _load(repo: Path, snapshots: bool) -> tuple[float, int]:
    """(load_latest's own time, records) in a fresh interpreter."""
    _, out = _run([sys.executable, "-c", LOAD, str(repo), "1" if snapshots else "0"])
    seconds, records, _ = out.split("\n")[-2].split()  # (after any progress bar)
    return float(seconds), int(records)


def _report(repo: Path) -> float:
    wall, _ = _run([sys.executable, "-m", "harness", "--repo", str(repo), "report"])
    return wall


def _append(path: Path, count: int) -> None:
    """``count`` records copied from the file's first lines: half of them newer records of
    their keys (started now), half records of a new machine id (new keys), so that no two
    appends, in this run or another, write the same record."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")
    machine = f"{time.time_ns() % 16**12:012x}"
    lines = []
    with open(path, "rb") as f:
        for i in range(count):
            d = json.loads(f.readline())
            if i % 2:
                d["machine_id"] = machine
            else:
                d["started_at"] = now
            lines.append(json.dumps(d) + "\n")
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, required=True, help="a COPY of a project (modified)")
    ap.add_argument("--append", type=int, default=1000, help="records appended (default 1000)")
    ap.add_argument("--no-report", action="store_true", help="time the load only")
    args = ap.parse_args()
    repo = args.repo.resolve()
    records = repo / "results" / "records"
    files = sorted(records.glob("*.jsonl"))
    if not files:
        sys.exit(f"{records}: no record files")
    largest = max(files, key=lambda p: p.stat().st_size)
    cache = repo / "results" / ".cache"

    t0 = time.perf_counter()
    size = 0
    for p in files:
        with open(p, "rb") as f:
            size += len(f.read())
    plain = time.perf_counter() - t0
    print(f"store: {len(files)} files, {size / 1e6:,.0f} MB; plain read {plain:.2f} s")

    shutil.rmtree(cache, ignore_errors=True)
    rows = []
    full, n = _load(repo, snapshots=False)
    rows.append(("load, no snapshot used (cache off)", full, n))
    cold, n = _load(repo, snapshots=True)
    rows.append(("load, no snapshot yet (writes one)", cold, n))
    same, n = _load(repo, snapshots=True)
    rows.append(("load, snapshot, nothing appended", same, n))
    _append(largest, args.append)
    grown, n = _load(repo, snapshots=True)
    rows.append((f"load, snapshot, {args.append:,} records appended", grown, n))
    if not args.no_report:
        shutil.rmtree(cache, ignore_errors=True)
        rows.append(("report, no snapshot yet", _report(repo), 0))
        rows.append(("report, snapshot, nothing appended", _report(repo), 0))
        _append(largest, args.append)
        rows.append((f"report, snapshot, {args.append:,} records appended", _report(repo), 0))
    for label, seconds, n in rows:
        count = f"  ({n:,} records)" if n else ""
        print(f"{label:44s} {seconds:6.2f} s  {seconds / plain:5.1f}x the plain read{count}")
    print(
        f"load with a snapshot: {full / same:.1f}x faster unchanged, {full / grown:.1f}x after the append"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
