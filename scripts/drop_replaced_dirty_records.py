"""Drop each record made by uncommitted code (its provenance's git_rev ends in -dirty) that a
clean record of the same key re-measured later.

    python scripts/drop_replaced_dirty_records.py [RECORDS_DIR]

The key is (entry, variant, environment, device, precision, trial); "later" is the clean
record's started_at. A -dirty record that nothing re-measured stays (it is the only
measurement of its key at its time) and is counted at the end. Lines are otherwise kept
byte for byte.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _key(r: dict) -> tuple:
    return (r["entry"], r["variant"], r["env"], r["device"], r["precision"], r.get("trial"))


def _dirty(r: dict) -> bool:
    return str((r.get("provenance") or {}).get("git_rev", "")).endswith("-dirty")


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results/records")
    files = sorted(folder.glob("*.jsonl"))
    clean: dict[tuple, str] = {}
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if not _dirty(r):
                clean[_key(r)] = max(clean.get(_key(r), ""), r.get("started_at") or "")
    dropped = left = 0
    for f in files:
        keep = []
        lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
        for line in lines:
            r = json.loads(line)
            if _dirty(r) and clean.get(_key(r), "") > (r.get("started_at") or ""):
                dropped += 1
                continue
            left += _dirty(r)
            keep.append(line)
        if len(keep) != len(lines):
            f.write_text("".join(keep), encoding="utf-8")
    print(f"{dropped} -dirty records dropped (re-measured later by clean ones); {left} remain")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
