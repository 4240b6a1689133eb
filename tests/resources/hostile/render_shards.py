"""Render N synthetic entries with 3 forked render workers (report.py's shards) into a
folder: the process a test SIGKILLs or SIGTERMs mid-render. argv: N OUT_DIR"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_report import synthesize  # noqa: E402

from harness.report import render_all  # noqa: E402

records = synthesize(int(sys.argv[1]))
print("rendering", flush=True)
render_all(records, [], sys.argv[2], workers=3)
print("done", flush=True)
