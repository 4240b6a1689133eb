"""The corrections (results/corrections/) checked by the knowledge base's own code: the
`deadends-dev` package, which ships deadends.dev's `generator` (validate, lookup,
process_outcomes) and its records. Run by `nox -s kb`, in a session of its own: the package's
top-level modules are named `data`, `generator` and `mcp`, which other packages also use.

For each proposal that edits records (signatures/, conditions/), on a copy of the package's
records in a temporary folder with the proposal's files laid over them:
1. `python -m generator.validate --data-only` passes;
2. every message the runs raised for a record, looked up with `generator.lookup.lookup_all`,
   ranks the record at least as high as before the proposal.
With the outcome lines (outcomes/) added to the copy's data/outcomes/, `process_outcomes` pools
them, and for every condition the conditions proposal writes, the releases it names as failing
are failures there (the feed does not contradict a corrected field).
It also says where the package's records differ from the ones the entries were made from.

Standard library only (the environment it runs in holds the package and nothing of the harness).
Exit 0: every check holds; 1: one failed (each named); 2: bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROPOSALS = ("signatures", "conditions")
_RANKS = """
import json, sys
from generator.lookup import lookup_all
asks = json.load(sys.stdin)
out = []
for kb_id, message in asks:
    ids = [m["id"] for m in lookup_all(message)]
    out.append(ids.index(kb_id) + 1 if kb_id in ids else None)
print(json.dumps(out))
"""
_POOL = """
import json, sys
from pathlib import Path
from generator.process_outcomes import process_outcomes
root = Path.cwd()
report = process_outcomes(root / "data" / "outcomes", root / "data" / "canons", root / "aggregated.json")
print(json.dumps(report["deltas"]))
"""


def _package_root() -> Path:
    try:
        import generator  # the package's own
    except ImportError:
        sys.exit("deadends-dev is not installed here: run `nox -s kb`")
    return Path(generator.__file__).resolve().parent.parent


def _copy(root: Path, into: Path) -> Path:
    shutil.copytree(root / "generator", into / "generator")
    shutil.copytree(root / "data" / "canons", into / "data" / "canons")
    return into


def _python(cwd: Path, code: str, stdin: str = "") -> str:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, input=stdin, text=True, capture_output=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return done.stdout.strip().splitlines()[-1]


def _differences(a: object, b: object, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += _differences(a.get(key), b.get(key), f"{where}.{key}" if where else key)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _differences(x, y, f"{where}[{i}]")
        return out
    return [] if a == b else [where]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corrections", nargs="?", default="results/corrections", type=Path)
    parser.add_argument("--repros", default="repros", type=Path)
    args = parser.parse_args(argv)
    manifest = args.corrections / "check.json"
    try:
        rows = json.loads(manifest.read_text(encoding="utf-8"))["records"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"{manifest}: {exc}", file=sys.stderr)
        return 2
    root = _package_root()
    failures: list[str] = []

    print(f"deadends-dev records at {root / 'data' / 'canons'}")
    drift = 0
    for row in rows:
        kept = args.repros / row["entry"] / "kb-record.json"
        theirs = root / row["kb_path"]
        if not theirs.is_file():
            print(f"  not in the package: {row['kb_id']} ({row['kb_path']})")
            drift += 1
            continue
        fields = _differences(
            json.loads(kept.read_text(encoding="utf-8")),
            json.loads(theirs.read_text(encoding="utf-8")),
        )
        if fields:
            drift += 1
            print(f"  differs from the entry's record: {row['kb_id']}: {', '.join(fields[:8])}")
    print(f"{drift} of {len(rows)} measured records differ from the package's (listed above)")

    with tempfile.TemporaryDirectory(prefix="kb-check-") as tmp:
        base = _copy(root, Path(tmp) / "base")
        asks = [(r["kb_id"], m) for r in rows for m in r["messages"]]
        before = json.loads(_python(base, _RANKS, json.dumps(asks)))
        for proposal in PROPOSALS:
            files = sorted((args.corrections / proposal / "data" / "canons").rglob("*.json"))
            copy = _copy(root, Path(tmp) / proposal)
            for f in files:
                rel = f.relative_to(args.corrections / proposal)
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, copy / rel)
            done = subprocess.run(
                [sys.executable, "-m", "generator.validate", "--data-only"],
                cwd=copy,
                env={**os.environ, "PYTHONPATH": str(copy)},
                capture_output=True,
                text=True,
            )
            verdict = "passes" if done.returncode == 0 else "FAILS"
            print(f"{proposal}: {len(files)} records; generator.validate --data-only {verdict}")
            if done.returncode:
                failures.append(
                    f"{proposal}: the validator failed:\n{(done.stdout + done.stderr)[-3000:]}"
                )
            after = json.loads(_python(copy, _RANKS, json.dumps(asks)))
            worse = [
                (kb, msg, b, a)
                for (kb, msg), b, a in zip(asks, before, after, strict=True)
                if b is not None and (a is None or a > b)
            ]
            better = sum(
                1
                for b, a in zip(before, after, strict=True)
                if a is not None and (b is None or a < b)
            )
            print(
                f"{proposal}: lookup of {len(asks)} messages the runs raised: "
                f"{better} rank their record higher, {len(worse)} lower"
            )
            for kb, msg, b, a in worse:
                failures.append(f"{proposal}: lookup ranks {kb} {b} -> {a} for {msg[:120]!r}")
        lines = sorted((args.corrections / "outcomes" / "data" / "outcomes").glob("*.jsonl"))
        outcomes = base / "data" / "outcomes"
        outcomes.mkdir(parents=True)
        for f in lines:
            shutil.copyfile(f, outcomes / f.name)
        deltas = json.loads(_python(base, _POOL))
        n = sum(d["total_reports"] for d in deltas.values())
        print(f"outcomes: process_outcomes pooled {n} lines of {len(deltas)} records")
        for row in rows:
            for condition in row["conditions"]:
                pooled = (
                    (deltas.get(row["kb_id"]) or {}).get("workarounds", {}).get(condition["action"])
                )
                failed = len(condition["failed_on"])
                if failed and (pooled is None or pooled["fail"] < failed):
                    failures.append(
                        f"outcomes: {row['kb_id']} workaround {condition['workaround'] + 1}: the "
                        f"condition names {failed} failing releases, the pooled lines "
                        f"{pooled and pooled['fail']}"
                    )
    for failure in failures:
        print(f"FAILED: {failure}")
    print("every check holds" if not failures else f"{len(failures)} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
