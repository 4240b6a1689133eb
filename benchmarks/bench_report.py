"""Time `python -m harness report` on a store written the way runs write it, against a
plain read of the same files, in one run.

    python benchmarks/bench_report.py [--records 1000000] [--entries 2500] [--machines 2]
        [--append 1000] [--repeat 3] [--store DIR]

A throwaway project is made in a temporary folder: results/records/<machine>.jsonl hold
``--records`` distinct records (one JSON line each, as Store.append writes them: every
line its own dict, its own start time, exception, traceback, checks and provenance), over
``--entries`` entries x 8 variants x N environments x device/precision slices, each key
measured by one machine. Then the CLI runs as a subprocess, exactly as a user runs it,
and its wall time is printed beside the time of a plain read of the files (their bytes,
once, from the page cache: the floor of any reader; the fastest of three reads after an
untimed one). The report runs as a user's does, keeping its caches (results/.cache) and
its compiled modules (__pycache__): on the new store; again with nothing appended
(``--repeat`` times); after a run appends ``--append`` records to 10 entries (``--repeat``
times, 10 other entries each time); after a run measures a new entry (``--repeat`` times,
each at another place among the entries); and after a run appends as many spread over
every entry. A report repeated counts by its median, with every run's time printed beside it. ``--store DIR`` keeps the written store in DIR and, on
a later run with the same sizes, copies it from there instead of writing it again (writing
a million records takes about two minutes). First it says how much Python work the
machine's CPUs do together against one (``parallelism``): a report's two renderers and
DuckDB's two threads gain no more than that, so it is the scale of every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.domain import cell_id, env_id  # noqa: E402
from harness.store.jsonl import Store  # noqa: E402
from harness.store.records import SCHEMA, Record  # noqa: E402

VARIANTS = [
    ("baseline", "baseline"),
    ("baseline-literal", "baseline"),
    ("workaround-1", "workaround"),
    ("workaround-2", "workaround"),
    ("workaround-3", "workaround"),
    ("dead-end-1", "dead_end"),
    ("dead-end-2", "dead_end"),
    ("control", "control"),
]
TORCH = [
    "1.10.2",
    "1.11.0",
    "1.12.1",
    "1.13.1",
    "2.0.1",
    "2.1.2",
    "2.2.2",
    "2.3.1",
    "2.4.1",
    "2.5.1",
]
LIGHTNING = ["1.9.5", "2.0.9", "2.1.4", "2.2.5", "2.4.0"]
SLICES = [("cpu", "fp32"), ("cpu", "fp16"), ("cpu", "bf16"), ("cuda", "fp16")]
OUTCOMES = ["reproduced"] * 5 + ["ok"] * 4 + ["other_error", "unsupported", "wrong_result"]
MESSAGES = [
    ("RuntimeError", "GradScaler unscale_() encountered None gradient"),
    (
        "RuntimeError",
        "unscale_() has already been called on this optimizer since the last update().",
    ),
    ("ValueError", "optimizer got an empty parameter list"),
    ("AssertionError", "No inf checks were recorded for this optimizer."),
    (
        "NotImplementedError",
        "Gradient clipping is not implemented for optimizers handling the unscaling.",
    ),
]
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/work/repros/x/repro.py", line {line}, in run\n    scaler.unscale_(optimizer)\n'
    '  File "/envs/torch/amp/grad_scaler.py", line 338, in unscale_\n'
    '    optimizer_state["found_inf_per_device"] = self._unscale_grads_(\n'
    "{type}: {message}\n"
)


def _record(
    rnd: random.Random,
    eid: str,
    variant: str,
    kind: str,
    env: str,
    versions: dict,
    device: str,
    precision: str,
    machine: tuple[str, str],
    i: int,
) -> dict:
    outcome = rnd.choice(OUTCOMES)
    exception = None
    reason = ""
    if outcome in ("reproduced", "other_error"):
        t, m = MESSAGES[rnd.randrange(len(MESSAGES))]
        exception = {
            "type": t,
            "message": m,
            "frame": f"/work/repros/x/repro.py:{40 + i % 50} in run",
            "traceback": TRACEBACK.format(line=40 + i % 50, type=t, message=m),
        }
    elif outcome == "unsupported":
        reason = "torch.amp.GradScaler('cpu') does not exist in this torch"
    elif outcome == "wrong_result":
        reason = f"postcondition failed: clipped: grad norm {rnd.random() * 9:.3f} > max_norm 0.5"
    day, sec = divmod(i, 86_400)
    return _as_stored(
        {
            "schema": SCHEMA,
            "entry": eid,
            "variant": variant,
            "kind": kind,
            "cell": cell_id(env, device, precision),
            "env": env,
            "device": device,
            "precision": precision,
            "trial": 0,
            "outcome": outcome,
            "reason": reason,
            "exception": exception,
            "checks": {
                "finite": {"ok": outcome != "wrong_result", "detail": f"loss {rnd.random():.4f}"},
                "_warnings": ["UserWarning: torch.cuda.amp.GradScaler is deprecated"],
            },
            "duration_s": round(rnd.random() * 3, 3),
            "exit_code": 0,
            "signal": None,
            "stdout_tail": "",
            "stderr_tail": "",
            "versions": dict(versions),
            "provenance": {
                "host": machine[0],
                "os": "Linux 6.8",
                "cpu": "AMD EPYC",
                "gpu": "none",
                "driver": "none",
                "harness_version": "0.1.0",
                "git_rev": "48711cb49177",
            },
            "started_at": f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T"
            f"{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}+00:00",
            "machine": machine[0],
            "machine_id": machine[1],
            "imported_from": "",
            "isolation": "fork",
            "run_s": round(rnd.random(), 3),
        }
    )


def _as_stored(d: dict) -> dict:
    """The record as the store writes it now: made by the store's own Record (fields a later
    schema adds take their defaults), so the benchmark follows the schema and cannot rot."""
    return Record.from_dict(d).to_dict()


def _envs() -> list[tuple[str, dict]]:
    return [
        (env_id("3.10", t, lt), {"python": "3.10.14", "torch": t + "+cpu", "lightning": lt})
        for t in TORCH
        for lt in LIGHTNING
    ]


def _slot(j: int, envs: list[tuple[str, dict]]) -> tuple[str, str, str, dict, str, str]:
    """The ``j``-th record of an entry: (variant, kind, env, versions, device, precision),
    every variant in every environment, then in every slice."""
    variant, kind = VARIANTS[j % len(VARIANTS)]
    env, versions = envs[j // len(VARIANTS) % len(envs)]
    device, precision = SLICES[j // (len(VARIANTS) * len(envs)) % len(SLICES)]
    return variant, kind, env, versions, device, precision


def _append_as_a_run(records_dir: Path, lines: list[str]) -> None:
    """``lines`` through the store's writer, as runs and merges append (under the file's
    lock, with the append note the report's snapshot reads: harness/store/appends.py), in a
    few appends as a run's jobs finish, to runner-0's file (the machine the lines name)."""
    store, path = Store(records_dir), records_dir / "runner-0.jsonl"
    step = max(1, len(lines) // 10)
    for k in range(0, len(lines), step):
        store._append_lines(lines[k : k + step], path)


def write_store(records_dir: Path, n_records: int, n_entries: int, n_machines: int) -> int:
    """Write the store; returns the number of records written."""
    rnd = random.Random(0)
    envs = _envs()
    per_entry = max(1, n_records // n_entries)
    machines = [(f"runner-{m}", f"{m:012x}") for m in range(n_machines)]
    files = [open(records_dir / f"{name}.jsonl", "w") for name, _ in machines]  # noqa: SIM115
    sample = None
    i = 0
    try:
        for e in range(n_entries):
            eid = f"pytorch/entry-{e:05d}"
            for j in range(per_entry):
                m = (j // (len(VARIANTS) * len(envs) * len(SLICES))) % n_machines
                d = _record(rnd, eid, *_slot(j, envs), machines[m], i)
                if sample is None:
                    sample = d
                files[m].write(json.dumps(d) + "\n")
                i += 1
    finally:
        for f in files:
            f.close()
    # the lines have the shape Store writes: a record read back writes the same dict
    assert sample is not None
    assert Record.from_dict(sample).to_dict() == sample, "the benchmark's records are out of date"
    return i


def append_records(
    records_dir: Path, n_records: int, n_entries: int, touched: int, offset: int = 0
) -> int:
    """Append ``n_records`` records to the store, the way a later run writes them: reruns of
    keys already stored (a newer start time, fresh outcomes) in ``touched`` entries spread
    over the store's ``n_entries`` (as many as there are records, if fewer), the first of
    them ``offset`` entries in (so that a repeat touches other entries). Returns how many
    entries were touched."""
    rnd = random.Random(touched * 1000 + offset)
    env, versions = (
        env_id("3.10", TORCH[-1], LIGHTNING[-1]),
        {"python": "3.10.14", "torch": TORCH[-1] + "+cpu", "lightning": LIGHTNING[-1]},
    )
    step = max(1, n_entries // touched)
    first = offset % step
    entries = [f"pytorch/entry-{e:05d}" for e in range(first, n_entries, step)][:touched]
    entries = entries[:n_records]
    machine = ("runner-0", f"{0:012x}")
    lines = []
    for i in range(n_records):
        eid = entries[i % len(entries)]
        variant, kind = VARIANTS[(i // len(entries)) % len(VARIANTS)]
        device, precision = SLICES[(i // (len(entries) * len(VARIANTS))) % len(SLICES)]
        d = _record(rnd, eid, variant, kind, env, versions, device, precision, machine, i)
        d["started_at"] = f"2027-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}+00:00"
        lines.append(json.dumps(_as_stored(d)) + "\n")
    _append_as_a_run(records_dir, lines)
    return len(entries)


def add_entry(records_dir: Path, eid: str, n_records: int) -> None:
    """Append the records of a new entry ``eid`` (``n_records``, its variants over the
    environments and slices as the stored entries'), the way a run that measured it writes
    them: through the store's writer, in a few appends."""
    rnd = random.Random(eid)
    envs = _envs()
    machine = ("runner-0", f"{0:012x}")
    lines = []
    for j in range(n_records):
        d = _record(rnd, eid, *_slot(j, envs), machine, j)
        d["started_at"] = f"2027-02-01T00:{j // 60 % 60:02d}:{j % 60:02d}+00:00"
        lines.append(json.dumps(_as_stored(d)) + "\n")
    _append_as_a_run(records_dir, lines)


def _kept_store(args: argparse.Namespace, records_dir: Path) -> int:
    """Write the store into ``records_dir``, or copy it from ``--store`` where a store of
    the same sizes was kept there; returns the number of records."""
    if args.store is None:
        return write_store(records_dir, args.records, args.entries, args.machines)
    sizes = f"{args.records}-{args.entries}-{args.machines}"
    kept = args.store / sizes
    if not (kept / "done").is_file():
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        n = write_store(kept, args.records, args.entries, args.machines)
        (kept / "done").write_text(f"{n}\n")
    for p in sorted(kept.glob("*.jsonl")):
        shutil.copyfile(p, records_dir / p.name)
    return int((kept / "done").read_text())


def _python_work(_: int = 0) -> float:
    """A fixed piece of pure-Python work (what the report's aggregation and rendering are
    mostly made of): its CPU-bound seconds."""
    t0 = time.perf_counter()
    total = 0
    for i in range(4_000_000):
        total += i * i % 7
    return time.perf_counter() - t0


def parallelism() -> tuple[float, int]:
    """How much more Python work the machine does with a process per CPU than with one:
    the same piece of work, alone (the fastest of three), then once in each of ``os.cpu_count()``
    processes at once (their wall time). Where the CPUs share cores (SMT siblings), or the
    host of a VM is busy, this is well under the CPU count, and so is what the report's
    renderers or DuckDB's threads can gain: the times below read against it (on this
    project's VM, two renders of the same entries at once took 1.55x as long each as one
    alone at one hour, and no longer than alone half an hour later)."""
    import multiprocessing

    cpus = os.cpu_count() or 1
    alone = min(_python_work() for _ in range(3))
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    with context.Pool(cpus) as pool:
        pool.map(_python_work, range(cpus))  # (the workers started, untimed)
        t0 = time.perf_counter()
        pool.map(_python_work, range(cpus), chunksize=1)
        together = time.perf_counter() - t0
    return cpus * alone / together, cpus


def plain_read(files: list[Path], n: int) -> float:
    """The floor of any reader: the files' bytes read once and their lines counted, from
    the page cache. A store just written or copied is still being written back to disk, which
    slows a first read by up to 3x and would flatter every ratio: one read first, untimed,
    then the fastest of three."""
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        lines = 0
        for p in files:
            with open(p, "rb") as f:
                lines += f.read().count(b"\n")
        times.append(time.perf_counter() - t0)
        assert lines == n
    return min(times[1:])


def report(repo: Path) -> tuple[float, float, str]:
    """``python -m harness --repo <repo> report`` as a user runs it: (wall s, CPU s of it
    and its children, what it printed)."""
    # as a user's Python runs it: the harness's compiled modules cached in __pycache__, as
    # Python does by default (where PYTHONDONTWRITEBYTECODE is set, as on this project's
    # machines, every report would compile every module of the harness again: about 0.2 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "harness", "--repo", str(repo), "report"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:], sep="\n")
        raise SystemExit(done.returncode)
    return wall, cpu, done.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--entries", type=int, default=2500)
    ap.add_argument("--machines", type=int, default=2)
    ap.add_argument("--append", type=int, default=1000, help="records a later run appends")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="20,000 records of 100 entries, 200 appended: the same ratios in about a minute "
        "(CI runs it, so a change that breaks or slows the report shows in its log)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="how many times the short reports run (nothing appended; 10 entries appended to): "
        "their median counts",
    )
    ap.add_argument(
        "--store",
        type=Path,
        default=None,
        help="keep the written store in this folder and reuse it on later runs of the same sizes",
    )
    args = ap.parse_args()
    if args.quick:
        args.records, args.entries, args.append = 20_000, 100, 200
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        repo = Path(tmp)
        records_dir = repo / "results" / "records"
        records_dir.mkdir(parents=True)
        (repo / "repros").mkdir()
        t0 = time.perf_counter()
        n = _kept_store(args, records_dir)
        files = sorted(records_dir.glob("*.jsonl"))
        size = sum(p.stat().st_size for p in files)
        print(
            f"store: {n:,} records, {args.entries:,} entries, {len(files)} files, "
            f"{size / 1e6:,.0f} MB (written in {time.perf_counter() - t0:.1f} s)"
        )
        gain, cpus = parallelism()
        print(
            f"machine: {cpus} CPUs, load average {os.getloadavg()[0]:.1f} at start; "
            f"{cpus} processes of Python work at once do {gain:.2f}x the work of one "
            f"(CPUs that share cores, or a busy host, give less than {cpus}x)"
        )

        plain = plain_read(files, n)
        print(f"plain read of the files: {plain:.2f} s (the fastest of 3, after one untimed)\n")

        # a report's caches (results/.cache) are kept between reports: the first report of
        # a store fills them, later ones read and render only what changed since. The short
        # reports run --repeat times (a run appending to 10 other entries each time) and
        # count by their median: on a shared machine one run of 2 s moves by a third
        rows = [("first report (no cache: everything read and rendered)", [report(repo)])]
        rows.append(("again, nothing appended", [report(repo) for _ in range(args.repeat)]))
        tens = []
        for k in range(args.repeat):
            m = append_records(records_dir, args.append, args.entries, 10, offset=7 * k)
            tens.append(report(repo))
        rows.append((f"after a run appends {args.append:,} records to {m:,} entries", tens))
        # a run that measured an entry the store did not hold: each time at another place
        # among the entries (early, midway, late), so that the files of several entries
        # after it hold other entries than before
        per_entry = max(1, n // args.entries)
        news = []
        for k in range(args.repeat):
            place = (2 * k + 1) * args.entries // (2 * args.repeat)
            add_entry(records_dir, f"pytorch/entry-{place:05d}-new", per_entry)
            news.append(report(repo))
        rows.append((f"after a run measures a new entry ({per_entry:,} records)", news))
        m = append_records(records_dir, args.append, args.entries, args.entries)
        rows.append(
            (f"after a run appends {args.append:,} records to {m:,} entries", [report(repo)])
        )
        width = max(len(label) for label, _ in rows)
        print(f"{'python -m harness report':{width}}   wall      CPU   x plain read  (runs)")
        for label, runs in rows:
            wall = statistics.median(w for w, _, _ in runs)
            cpu = statistics.median(c for _, c, _ in runs)
            spread = (
                f"  (median of {len(runs)}: {', '.join(f'{w:.2f}' for w, _, _ in runs)} s)"
                if len(runs) > 1
                else ""
            )
            print(f"{label:{width}}  {wall:6.2f} s {cpu:6.2f} s  {wall / plain:6.1f}x{spread}")
        # the phases of 5 s or more, as the first report told them (harness/report/progress.py)
        phases = [
            line
            for line in rows[0][1][0][2].splitlines()
            if line.startswith("report: ") and line.endswith(" s")
        ]
        if phases:
            print("\nthe first report's slow phases:", *(f"  {p[8:]}" for p in phases), sep="\n")
        print(f"\nlast report said: {rows[-1][1][-1][2].splitlines()[-1][:300]}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
