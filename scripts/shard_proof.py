"""Proof that the nightly fan-out loses and changes nothing: a plan run as N shards, each
into its own results folder under its own machine name, merged, equals the plan run whole.

    python scripts/shard_proof.py --profile cpu --env 'py3.10-torch1.12.1*' \
        --env 'py3.11-torch2.2.2*' --env 'py3.9-torch1.10.2*' --envs-dir /work/envs

What it does, all through the CLI users type (``python -m harness ...``):

1. copies the project (matrix.yaml, repros/) to ``WORK/project``: one checkout, as every CI
   job has one at the same path (tracebacks name files by absolute path);
2. runs the selection whole (``--machine whole``) and keeps its records folder;
3. runs it again as shards ``K/N`` (``--machine ci-K``), each into an empty records folder
   (a fresh machine: its own machine id), and keeps each folder;
4. merges the N folders into an empty store (``python -m harness merge``), twice: the
   second merge must add nothing;
5. compares the merged records with the whole run's, per key, ignoring only timing
   (``started_at``, ``duration_s``, ``run_s``) and machine (``machine``, ``machine_id``,
   ``imported_from``);
6. renders the report (``python -m harness report``) from each side's records with timing
   and machine set to the same values, and compares every output byte for byte.

Prints what it measured and exits 0 when both are equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.store.jsonl import Store, latest  # noqa: E402
from harness.store.records import Record  # noqa: E402

__all__ = ["main", "normalised", "report_bytes"]

# what a record may differ in between a sharded and a whole run of the same job
IGNORED = ("started_at", "duration_s", "run_s", "machine", "machine_id", "imported_from")


def normalised(records: Sequence[Record]) -> dict[str, dict[str, object]]:
    """Key id -> the record's content without timing and machine (one record per key)."""
    out: dict[str, dict[str, object]] = {}
    for r in latest(records):
        if r.key.id in out:
            raise ValueError(f"{r.key.id}: more than one machine ran it")
        d = r.to_dict()
        for name in IGNORED:
            d.pop(name, None)
        out[r.key.id] = d
    return out


def harness(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(
            f"harness {' '.join(args)} failed ({out.returncode}):\n{out.stdout}{out.stderr}"
        )
    return out


def run_into(project: Path, keep: Path, run_args: list[str]) -> float:
    """Run with an empty records folder (a fresh machine), keep the folder; wall seconds."""
    records = project / "results" / "records"
    shutil.rmtree(records, ignore_errors=True)
    started = time.perf_counter()
    harness(project, "run", "--no-report", *run_args)
    seconds = time.perf_counter() - started
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(records, keep)
    return seconds


def report_bytes(project: Path, records: Sequence[Record]) -> dict[str, bytes]:
    """Every output of ``harness report`` (results/ and the entry documents) rendered from
    ``records`` with timing and machine made equal."""
    folder = project / "results" / "records"
    shutil.rmtree(project / "results", ignore_errors=True)
    folder.mkdir(parents=True)
    with open(folder / "m.jsonl", "w") as f:
        for r in latest(records):
            same = dataclasses.replace(
                r,
                started_at="2026-01-01T00:00:00+00:00",
                duration_s=1.0,
                run_s=None if r.run_s is None else 0.5,
                machine="m",
                machine_id="",
                imported_from="",
            )
            f.write(json.dumps(same.to_dict()) + "\n")
    harness(project, "report")
    outputs = {}
    for path in sorted((project / "results").rglob("*")):
        # (results/records holds the inputs; results/.cache the report's caches, not outputs)
        top = path.relative_to(project / "results").parts[0]
        if path.is_file() and top not in ("records", ".cache"):
            outputs[str(path.relative_to(project))] = path.read_bytes()
    for path in sorted((project / "repros").rglob("document.md")):
        outputs[str(path.relative_to(project))] = path.read_bytes()
    return outputs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--project", type=Path, default=REPO, help="where matrix.yaml and repros/ are")
    ap.add_argument("--work", type=Path, default=None, help="working folder (default: a temp dir)")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--entry", action="append", default=[])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--envs-dir", default=None)
    args = ap.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="shard-proof-"))
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    shutil.copy(args.project / "matrix.yaml", project / "matrix.yaml")
    shutil.copytree(
        args.project / "repros", project / "repros", ignore=shutil.ignore_patterns("__pycache__")
    )

    selection = [*(["--profile", args.profile] if args.profile else [])]
    for flag, values in (("--env", args.env), ("--entry", args.entry), ("--variant", args.variant)):
        for v in values:
            selection += [flag, v]
    common = [*selection, "-j", str(args.jobs)]
    if args.envs_dir:
        common += ["--envs-dir", args.envs_dir]

    listing = harness(project, "list", *selection).stdout
    print(listing.strip().splitlines()[-1] if listing.strip() else "")
    # (the whole run builds the environments not built yet; the shards reuse them)
    whole_s = run_into(project, work / "whole", [*common, "--machine", "whole"])
    shard_s = []
    for k in range(1, args.shards + 1):
        shard_s.append(
            run_into(
                project,
                work / f"shard-{k}",
                [*common, "--shard", f"{k}/{args.shards}", "--machine", f"ci-{k}"],
            )
        )

    shutil.rmtree(project / "results", ignore_errors=True)
    folders = [str(work / f"shard-{k}") for k in range(1, args.shards + 1)]
    first = harness(project, "merge", *folders).stdout.strip().splitlines()[-1]
    again = harness(project, "merge", *folders).stdout.strip().splitlines()[-1]
    merged = Store(project / "results" / "records").load()
    whole = Store(work / "whole").load()
    shards = [Store(f).load().records for f in folders]

    a, b = normalised(whole.records), normalised(merged.records)
    print(f"whole run: {len(whole.records)} records in {whole_s:.1f} s (machine whole)")
    for k, (records, seconds) in enumerate(zip(shards, shard_s, strict=True), 1):
        envs = sorted({r.env for r in records})
        print(
            f"shard {k}/{args.shards}: {len(records)} records in {seconds:.1f} s, machine ci-{k}, {', '.join(envs)}"
        )
    print(f"merge: {first}; merged again: {again}")
    machines = sorted({str(r.machine_key) for r in merged.records})
    print(
        f"merged store: {len(merged.records)} records from {len(machines)} machines: {', '.join(machines)}"
    )
    missing, extra = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    records_equal = not (missing or extra or differ) and len(merged.records) == len(whole.records)
    print(
        f"records equal (ignoring {', '.join(IGNORED)}): {records_equal} "
        f"({len(a)} keys whole, {len(b)} merged; {len(missing)} missing, {len(extra)} extra, "
        f"{len(differ)} differ)"
    )
    for key in (missing + extra + differ)[:10]:
        print(f"  {key}")
        if key in differ:
            for field in sorted(set(a[key]) | set(b[key])):
                if a[key].get(field) != b[key].get(field):
                    print(
                        f"    {field}: {str(a[key].get(field))[:150]!r} != {str(b[key].get(field))[:150]!r}"
                    )

    whole_report = report_bytes(project, whole.records)
    merged_report = report_bytes(project, merged.records)
    changed = sorted(
        p
        for p in set(whole_report) | set(merged_report)
        if whole_report.get(p) != merged_report.get(p)
    )
    reports_equal = not changed
    size = sum(map(len, whole_report.values()))
    print(
        f"reports identical: {reports_equal} ({len(whole_report)} files, {size} bytes; {len(changed)} differ)"
    )
    for p in changed[:10]:
        print(f"  {p}")
    print(f"work folder: {work}")
    return 0 if records_equal and reports_equal and "0 records added" in again else 1


if __name__ == "__main__":
    sys.exit(main())
