"""A newcomer's first run, timed as they meet it: a fresh clone, empty caches, the README's
main command.

    python benchmarks/bench_first_run.py [--repo PATH] [--rev REV] [--keep]

Clones REV (default HEAD) of the repository into a temporary folder, points uv at an empty
cache there (``UV_CACHE_DIR``; nox's own session is made by uv too) and times
``nox -s matrix -- --machine bench-first-run``: every wheel downloaded, every environment
built, every job run, the reports rendered. Prints one JSON line: wall seconds, the
environments built, the records written, the cache's size, and the run's last lines. The
clone and its cache are removed unless ``--keep``.

The README's quick start promises a first run of a few minutes; it took 702 s
when the default profile built 19 environments (2 rows and 17 derived from ``requires:``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    nox = shutil.which("nox")
    if nox is None:
        sys.exit("nox is not on PATH (pip install nox uv)")
    scratch = Path(tempfile.mkdtemp(prefix="bench-first-run-"))
    clone = scratch / "clone"
    try:
        subprocess.run(
            ["git", "clone", "--quiet", "--no-hardlinks", args.repo, str(clone)], check=True
        )
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", args.rev], check=True)
        env = {**os.environ, "UV_CACHE_DIR": str(scratch / "uv-cache")}
        env.pop("HARNESS_ENVS_DIR", None)
        start = time.monotonic()
        done = subprocess.run(
            [nox, "-s", "matrix", "--", "--machine", "bench-first-run"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - start
        envs = (
            sorted(p.name for p in (clone / ".envs").iterdir())
            if (clone / ".envs").is_dir()
            else []
        )
        records = clone / "results" / "records" / "bench-first-run.jsonl"
        n_records = len(records.read_text(encoding="utf-8").splitlines()) if records.exists() else 0
        tail = (done.stdout + done.stderr).strip().splitlines()[-6:]
        print(
            json.dumps(
                {
                    "rev": subprocess.run(
                        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                        capture_output=True,
                        text=True,
                    ).stdout.strip(),
                    "exit": done.returncode,
                    "wall_s": round(wall, 1),
                    "environments": envs,
                    "records": n_records,
                    "uv_cache_gb": round(_size(scratch / "uv-cache") / 1e9, 2),
                    "last_lines": tail,
                }
            )
        )
        return done.returncode
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
