#!/usr/bin/env python3
"""Drop every -dirty record whose key (entry, variant, env, device, precision, trial) has a
clean record in the committed files: a clean rerun replaced it."""
import json, glob, sys
files = sorted(glob.glob("results/records/*.jsonl"))
clean = {}
for f in files:
    for line in open(f, encoding="utf-8"):
        r = json.loads(line)
        if "-dirty" not in json.dumps(r.get("provenance", {})):
            k = (r["entry"], r["variant"], r["env"], r["device"], r["precision"], r.get("trial"))
            clean[k] = max(clean.get(k, ""), r["started_at"])
dropped = {}
for f in files:
    keep, n = [], 0
    for line in open(f, encoding="utf-8"):
        if "-dirty" in line:
            r = json.loads(line)
            k = (r["entry"], r["variant"], r["env"], r["device"], r["precision"], r.get("trial"))
            # replaced: a clean record of the same key started after it (a clean rerun)
            if json.dumps(r.get("provenance", {})).count("-dirty") and clean.get(k, "") > r["started_at"]:
                n += 1
                continue
        keep.append(line)
    if n:
        open(f, "w", encoding="utf-8").writelines(keep)
        dropped[f] = n
print(dropped, sum(dropped.values()))
