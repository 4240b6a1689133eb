"""Compare two machines' record files cell by cell: did the warm worker change any answer?

    python benchmarks/compare_records.py results/records/vm.jsonl results/records/vm-warm.jsonl

For every (entry, variant, cell) of the second file, the outcome must equal the outcome of
each trial of the first file (a cell whose trials disagree there is named as flaky). Both
files are read as the report reads them: through the store's migrations and validation,
and re-read against the entries (a schema-2 "reproduced" that was a variant's own
signature is "related", harness.aggregate.reread). Also
prints the isolation modes of the second file and its wall time per job from the records'
own start times (median over environments of (last start - first start) / (jobs - 1)).
Exits 1 when a cell differs.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import statistics
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]


REPO = Path(__file__).resolve().parent.parent


def _records(path: Path) -> list[dict[str, Any]]:
    """The file's records as the report reads them, as dicts (see the module docstring)."""
    from harness.aggregate import reread
    from harness.spec.entries import load_entries
    from harness.store.jsonl import LoadResult, parse_bytes

    loaded = LoadResult()
    parse_bytes(path.read_bytes(), path, loaded)
    for warning in loaded.warnings:
        print(f"warning: {warning}")
    entries = {e.id: e for e in load_entries(REPO / "repros")}
    by_entry: dict[str, list[Any]] = collections.defaultdict(list)
    for r in loaded.records:
        by_entry[r.entry].append(r)
    out = []
    for entry_id, records in by_entry.items():
        entry = entries.get(entry_id)
        out += [r.to_dict() for r in (reread(records, entry) if entry else records)]
    return out


def wall_per_job(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per environment (and trial: each trial of a profile was its own run): seconds
    between its first and last job start, per job after the first (the records' own start
    times; 1 s resolution, so over 40 jobs it is exact enough)."""
    starts: dict[str, list[dt.datetime]] = collections.defaultdict(list)
    for r in records:
        if r.get("started_at") and r["outcome"] not in ("env_failed", "skipped"):
            key = f"{r['env']}#{r['trial']}"
            starts[key].append(dt.datetime.fromisoformat(r["started_at"]))
    return {
        key: (max(s) - min(s)).total_seconds() / (len(s) - 1)
        for key, s in starts.items()
        if len(s) > 1
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the committed records (fresh interpreters)")
    ap.add_argument("after", type=Path, help="the rerun's records (warm worker)")
    args = ap.parse_args(argv)
    before: dict[tuple[str, str, str], set[str]] = collections.defaultdict(set)
    for r in _records(args.before):
        before[(r["entry"], r["variant"], r["cell"])].add(r["outcome"])
    after = _records(args.after)
    equal, differ, missing = 0, [], []
    for r in after:
        key = (r["entry"], r["variant"], r["cell"])
        if key not in before:
            missing.append(key)
        elif before[key] == {r["outcome"]}:
            equal += 1
        else:
            differ.append((key, sorted(before[key]), r["outcome"], r.get("reason", "")))
    cells = len({(r["entry"], r["variant"], r["cell"]) for r in after})
    print(f"{args.after}: {len(after)} records, {cells} cells")
    print(f"  outcome equal to {args.before}: {equal}")
    print(f"  different: {len(differ)}; not in {args.before.name}: {len(missing)}")
    for key, was, now, reason in differ:
        flaky = " (flaky there: its trials disagree)" if len(was) > 1 else ""
        print(f"    {'::'.join(key)}: {'/'.join(was)}{flaky} -> {now} {reason[:160]}")
    for key in missing:
        print(f"    not measured before: {'::'.join(key)}")
    modes = collections.Counter(r.get("isolation", "process") for r in after)
    print(f"  isolation: {dict(sorted(modes.items()))}")
    for label, records in (("before", _records(args.before)), ("after", after)):
        walls = wall_per_job(records)
        if walls:
            print(
                f"  wall time per job ({label}, from start times): median over "
                f"{len(walls)} environment runs {statistics.median(walls.values()):.2f} s "
                f"(min {min(walls.values()):.2f}, max {max(walls.values()):.2f})"
            )
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
