"""Session setup of `nox -s matrix` (make the venv, install the harness and its
dependencies), with virtualenv + pip against uv, each time in a fresh env folder, through
the nox command line users type. Trials alternate between the two backends; both package
caches are warm after the first pair (the figures after it are what a user sees again).

    python benchmarks/bench_nox_setup.py [--trials 3] [--session matrix]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BACKENDS = ("virtualenv", "uv")


def setup_seconds(nox: str, session: str, backend: str) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-nox-") as envdir:
        started = time.perf_counter()
        out = subprocess.run(
            [nox, "-s", session, "--install-only", "--envdir", envdir, "-fb", backend],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
    if out.returncode != 0:
        sys.exit(f"nox -s {session} with {backend} failed:\n{out.stderr[-2000:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--session", default="matrix")
    args = ap.parse_args()
    nox = shutil.which("nox")
    uv = shutil.which("uv")
    if not nox or not uv:
        sys.exit("needs nox and uv on PATH: pip install nox uv")
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for trial in range(1, args.trials + 1):
        for backend in BACKENDS:
            seconds = setup_seconds(nox, args.session, backend)
            times[backend].append(seconds)
            print(f"trial {trial}: nox -s {args.session} setup, {backend:>10}: {seconds:6.1f} s")
    pip, fast = (statistics.median(times[b][1:] or times[b]) for b in BACKENDS)
    print(
        f"median after the first trial: virtualenv+pip {pip:.1f} s, uv {fast:.1f} s, "
        f"uv is {pip / fast:.1f}x faster"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
