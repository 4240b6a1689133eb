"""Time aggregate + render of 1,000,000 synthetic records (2,500 entries x 8 variants x 50
cells), against a baseline measured in the same run: one plain pass over the records.

    python benchmarks/bench_report.py [--entries 2500] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.aggregate import aggregate  # noqa: E402
from harness.outcomes import Outcome  # noqa: E402
from harness.records import ExceptionInfo, Record  # noqa: E402
from harness.report import render_all  # noqa: E402

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
SLICES = [("cpu", "fp32")]  # 10 torch x 5 lightning = 50 envs x 1 slice = 50 cells


def synthesize(n_entries: int, seed: int = 0) -> list[Record]:
    rnd = random.Random(seed)
    provenance = [
        {
            "host": f"runner-{i}",
            "os": "Linux",
            "cpu": "x86_64",
            "gpu": "",
            "harness_version": "0.1.0",
            "git_rev": "abc1234",
        }
        for i in range(4)
    ]
    envs = []
    for t in TORCH:
        for lt in LIGHTNING:
            env = f"py3.10-torch{t}-lightning{lt}"
            envs.append(
                (
                    env,
                    {"python": "3.10.14", "torch": t + "+cpu", "lightning": lt, "numpy": "1.26.4"},
                )
            )
    messages = [
        ExceptionInfo("RuntimeError", f"message {i} | <b>", f"x.py:{i} in f") for i in range(20)
    ]
    pick = [Outcome.REPRODUCED] * 5 + [Outcome.OK] * 4 + [Outcome.OTHER_ERROR, Outcome.UNSUPPORTED]
    out = []
    for e in range(n_entries):
        eid = f"pytorch/entry-{e:05d}"
        for variant, kind in VARIANTS:
            for env, versions in envs:
                for device, precision in SLICES:
                    o = rnd.choice(pick)
                    exc = (
                        messages[rnd.randrange(20)]
                        if o in (Outcome.REPRODUCED, Outcome.OTHER_ERROR)
                        else None
                    )
                    out.append(
                        Record(
                            eid,
                            variant,
                            kind,
                            f"{env}-{device}-{precision}",
                            env,
                            device,
                            precision,
                            0,
                            o,
                            reason="no API" if o is Outcome.UNSUPPORTED else "",
                            exception=exc,
                            duration_s=rnd.random(),
                            versions=versions,
                            provenance=provenance[rnd.randrange(4)],
                            started_at=f"2024-05-{rnd.randrange(1, 29):02d}T00:00:00Z",
                        )
                    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=2500)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    records = synthesize(args.entries)
    print(f"synthesized {len(records):,} records in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    n = 0
    for r in records:  # the baseline: touch every record once
        if r.outcome is Outcome.OK:
            n += 1
    baseline = time.perf_counter() - t0

    t0 = time.perf_counter()
    aggregate(records)
    t_agg = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        prof = cProfile.Profile() if args.profile else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        summary = render_all(records, [], tmp)
        if prof:
            prof.disable()
        total = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in summary.outputs)
    print(f"baseline (one pass over the records): {baseline:.3f} s")
    print(f"aggregate only:                       {t_agg:.2f} s")
    print(
        f"aggregate + render everything:        {total:.2f} s  ({len(summary.outputs):,} files, {size / 1e6:.0f} MB)"
    )
    print(f"ratio to baseline:                    {total / baseline:.0f}x")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
