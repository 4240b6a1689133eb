"""What the engine itself costs on a store, without the harness's checks: the floors under
a first report's load, against a plain read of the same files, in one run.

    python benchmarks/bench_floor.py RECORDS_DIR

RECORDS_DIR: a folder of record files (``results/records`` of a project, or the store
bench_report.py keeps with ``--store``). Each query runs on a fresh DuckDB connection, once
after the plain read (whose fastest of three, after an untimed one, is the baseline):

- the lines split out of the text, as the engine reads them before checking each one;
- DuckDB's own JSON reader with ten typed columns, and with every column inferred and kept
  (a parse with none of the store's acceptance rules: the floor of any load that takes the
  lines' values, not their exact text);
- the cells grouped and counted over that reader (the floor of the aggregation's counts).

The gap between these and ``report``'s load (docs/performance.md) is the price of checking
every line as the store's validator would and of keeping its exact text.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import duckdb


def plain_read(files: list[Path]) -> float:
    """The files' bytes read once and their lines counted: the fastest of three after one."""
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        for p in files:
            with open(p, "rb") as f:
                f.read().count(b"\n")
        times.append(time.perf_counter() - t0)
    return min(times[1:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("records", type=Path, help="a folder of record files (*.jsonl)")
    args = ap.parse_args()
    files = sorted(args.records.glob("*.jsonl"))
    if not files:
        print(f"{args.records}: no record files (*.jsonl)", file=sys.stderr)
        return 2
    paths = [str(p) for p in files]
    size = sum(p.stat().st_size for p in files)
    print(
        f"{len(files)} files, {size / 1e6:,.0f} MB; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    plain = plain_read(files)
    print(f"plain read: {plain:.2f} s\n")
    typed = (
        "{entry: 'VARCHAR', variant: 'VARCHAR', kind: 'VARCHAR', cell: 'VARCHAR', "
        "env: 'VARCHAR', device: 'VARCHAR', precision: 'VARCHAR', trial: 'BIGINT', "
        "outcome: 'VARCHAR', started_at: 'VARCHAR'}"
    )
    queries = [
        (
            "the lines split out of the text",
            "SELECT sum(len(string_split(content, chr(10)))) FROM read_text(?)",
        ),
        (
            "read_json, ten typed columns",
            f"SELECT count(*) FROM read_json(?, format='newline_delimited', columns={typed})",
        ),
        (
            "read_json, every column kept",
            "CREATE TABLE kept AS SELECT * FROM read_json_auto(?, format='newline_delimited')",
        ),
        (
            "cells grouped and counted over read_json",
            "SELECT count(*) FROM (SELECT entry, variant, env, device, precision, count(*), "
            "count(*) FILTER (WHERE outcome = 'ok') FROM read_json(?, "
            f"format='newline_delimited', columns={typed}) GROUP BY ALL)",
        ),
    ]
    width = max(len(label) for label, _ in queries)
    for label, sql in queries:
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        t0 = time.perf_counter()
        con.execute(sql, [paths]).fetchall()
        took = time.perf_counter() - t0
        con.close()
        print(f"{label:{width}}  {took:6.2f} s  {took / plain:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
