"""Keep every imported deadends.dev record byte for byte, with the commit it is read at.

    python scripts/kb_keep_records.py GIT_DIR [--commit REV]

GIT_DIR: a clone of github.com/dbwls99706/deadends.dev (a bare one will do). For every row
of repros/deadends/<domain>/triage.yaml the record whose `id` is the row's kb_id is read at
REV (default HEAD) and written, unchanged:

- where the row has an entry, beside its entry.yaml as `kb-record.json`, and entry.yaml's
  `origin` gains `path` (the record's path in the knowledge base), `commit` and `record`;
- where it has none (scriptable: no), under `repros/deadends/<domain>/unscripted/` at the
  record's path below `data/canons/<domain>/`; triage.yaml's `source` gains `commit`.

The script refuses when an entry's facts (message, regex, rates, version range) differ from
the record at REV: the kept record must be the one the entry was made from. Run it again
and nothing changes. `python -m harness corrections` edits these records.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
KEPT = "kb-record.json"


def git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True).stdout


def records_by_id(git_dir: str, commit: str, domains: set[str]) -> dict[str, tuple[str, bytes]]:
    found: dict[str, tuple[str, bytes]] = {}
    for line in (
        git(git_dir, "ls-tree", "-r", "--name-only", commit, "data/canons/").decode().split()
    ):
        parts = line.split("/")
        if len(parts) < 4 or parts[2] not in domains or not line.endswith(".json"):
            continue
        raw = git(git_dir, "show", f"{commit}:{line}")
        rid = json.loads(raw)["id"]
        if rid in found:
            sys.exit(f"two records say id {rid!r}: {found[rid][0]} and {line}")
        found[rid] = (line, raw)
    return found


def facts_agree(entry_yaml: Path, record: dict) -> list[str]:
    """What the entry says that the record does not (empty: the record is its source)."""
    e = yaml.safe_load(entry_yaml.read_text(encoding="utf-8"))
    o = e.get("origin") or {}
    problems = []
    want = {
        "message": record["error"]["signature"],
        "regex": record["error"]["regex"],
        "version_range": record["environment"]["runtime"]["version_range"],
    }
    for key, value in want.items():
        if key in o and o[key] != value:
            problems.append(f"origin.{key}: {o[key]!r} vs {value!r}")
    if e["claims"].get("fix_rate") != record["verdict"]["fix_success_rate"]:
        problems.append("claims.fix_rate")
    rates: dict[str, set[float]] = {}
    for v in e.get("variants") or []:
        claim = v.get("claim") or {}
        if "rate" in claim:
            rates.setdefault(claim["ref"], set()).add(claim["rate"])
    for what, key, field in (
        ("workaround", "workarounds", "success_rate"),
        ("dead end", "dead_ends", "fail_rate"),
    ):
        for i, item in enumerate(record[key], 1):
            ref = f"{what} {i}"
            if ref in rates and rates[ref] != {item[field]}:
                problems.append(f"{ref}: {sorted(rates[ref])} vs {item[field]}")
    return problems


def add_origin_lines(entry_yaml: Path, path: str, commit: str) -> bool:
    """entry.yaml with origin's path, commit and record after its url line (comments and
    order kept); False where they are there already."""
    text = entry_yaml.read_text(encoding="utf-8")
    if re.search(r"^  record: ", text, re.M):
        return False
    m = re.search(r"^origin:\n(?:  .*\n)*?  url: .*\n", text, re.M)
    if m is None:
        sys.exit(f"{entry_yaml}: no origin.url line to add the record's lines after")
    lines = f'  path: "{path}"\n  commit: "{commit}"\n  record: "{KEPT}"\n'
    entry_yaml.write_text(text[: m.end()] + lines + text[m.end() :], encoding="utf-8")
    return True


def add_triage_commit(triage: Path, commit: str) -> None:
    text = triage.read_text(encoding="utf-8")
    if re.search(r"^  commit: ", text, re.M):
        return
    m = re.search(r"^  repository: .*\n", text, re.M)
    if m is None:
        sys.exit(f"{triage}: no source.repository line")
    line = f"  commit: {commit}   # the records under unscripted/ and beside each entry are read here\n"
    triage.write_text(text[: m.end()] + line + text[m.end() :], encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--commit", default="HEAD")
    args = parser.parse_args()
    commit = git(args.git_dir, "rev-parse", args.commit).decode().strip()
    triages = sorted((REPO / "repros" / "deadends").glob("*/triage.yaml"))
    domains = {t.parent.name for t in triages}
    found = records_by_id(args.git_dir, commit, domains)
    kept = changed = 0
    for triage in triages:
        domain = triage.parent.name
        add_triage_commit(triage, commit)
        for row in yaml.safe_load(triage.read_text(encoding="utf-8"))["entries"]:
            if row["kb_id"] not in found:
                sys.exit(f"{triage}: {row['kb_id']} is not in the knowledge base at {commit}")
            path, raw = found[row["kb_id"]]
            if row.get("entry"):
                folder = REPO / "repros" / row["entry"]
                problems = facts_agree(folder / "entry.yaml", json.loads(raw))
                if problems:
                    sys.exit(f"{folder}: the record at {commit} is not its source: {problems}")
                target = folder / KEPT
                changed += add_origin_lines(folder / "entry.yaml", path, commit)
            else:
                target = (
                    triage.parent / "unscripted" / Path(path).relative_to(f"data/canons/{domain}")
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_bytes() != raw:
                target.write_bytes(raw)
            kept += 1
    print(f"{kept} records kept at {commit}; {changed} entry.yaml files given their origin lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
