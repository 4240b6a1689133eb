"""Render N synthetic entries with 3 forked render workers (report.py's shards) into a
folder: the process a test SIGKILLs or SIGTERMs mid-render. argv: N OUT_DIR"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from harness.outcomes import Outcome  # noqa: E402
from harness.report.outputs import render_all  # noqa: E402
from harness.store.records import ExceptionInfo, Record  # noqa: E402

OUTCOMES = [Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR, Outcome.UNSUPPORTED]


def synthesize(n_entries: int) -> list[Record]:
    records = []
    for e in range(n_entries):
        for v, (variant, kind) in enumerate([("baseline", "baseline"), ("fix", "workaround")]):
            for t in range(20):
                env = f"py3.10-torch2.{t}.0-lightning2.1.4"
                outcome = OUTCOMES[(e + v + t) % len(OUTCOMES)]
                records.append(
                    Record(
                        entry=f"pytorch/entry-{e:05d}",
                        variant=variant,
                        kind=kind,
                        cell=f"{env}-cpu-fp32",
                        env=env,
                        device="cpu",
                        precision="fp32",
                        trial=0,
                        outcome=outcome,
                        exception=ExceptionInfo("RuntimeError", f"message {t}", "x.py:1 in f")
                        if outcome in (Outcome.REPRODUCED, Outcome.OTHER_ERROR)
                        else None,
                        versions={"python": "3.10.14", "torch": f"2.{t}.0", "lightning": "2.1.4"},
                        provenance={"host": "box"},
                        started_at="2026-11-29T00:00:00+00:00",
                    )
                )
    return records


records = synthesize(int(sys.argv[1]))
print("rendering", flush=True)
render_all(records, [], sys.argv[2], workers=3)
print("done", flush=True)
