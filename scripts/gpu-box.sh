#!/usr/bin/env bash
# The GPU box: run the gpu-nightly profile's seed entries on this machine's preinstalled
# stack, with the `existing` backend (nothing is installed: no package index, no uv needed),
# and leave ONE record file to bring back and merge.
#
#   bash scripts/gpu-box.sh [OUTDIR]      # OUTDIR: where a copy of the record file goes
#
# Needs: a python3 with torch, lightning, packaging, PyYAML and rich (numpy and Pillow only
# for reports). Bounded: the whole run stops after GPU_BOX_BUDGET_S seconds (default 420)
# and each run after GPU_BOX_RUN_TIMEOUT_S (default 120); a second call resumes (--resume).
# Settings (environment): PYTHON (default python3), GPU_BOX_MACHINE (default gpu-<host>),
# GPU_BOX_ENTRIES (entry globs, default the two seed entries), GPU_BOX_JOBS (default 8),
# GPU_BOX_PROFILE (default gpu-nightly).
# Then, on the main machine:
#   python -m harness merge gpu-<host>.jsonl && python -m harness report
set -uo pipefail
cd "$(dirname "$0")/.."

# the interpreter itself (not a launcher such as a pyenv shim): it is the environment
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)') \
  || { echo "gpu-box: ${PYTHON:-python3} does not run"; exit 2; }
BUDGET=${GPU_BOX_BUDGET_S:-420}
RUN_TIMEOUT=${GPU_BOX_RUN_TIMEOUT_S:-120}
MACHINE=${GPU_BOX_MACHINE:-gpu-$(hostname -s)}
ENTRIES=${GPU_BOX_ENTRIES:-"pytorch/grad-scale-unscale-error lightning/gradient-clipping-optimizer-handles-unscaling"}
JOBS=${GPU_BOX_JOBS:-8}
PROFILE=${GPU_BOX_PROFILE:-gpu-nightly}
RECORDS="results/records/$MACHINE.jsonl"
OUTDIR=${1:-}

echo "== gpu-box $(date -u +%FT%TZ): machine $MACHINE, profile $PROFILE, budget ${BUDGET} s, $PY"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not on this machine"

entry_args=()
for entry in $ENTRIES; do entry_args+=(--entry "$entry"); done
started=$(date +%s)
# the harness stops like Ctrl-C on SIGTERM: running children ended, every finished record kept
timeout -k 15 "$BUDGET" "$PY" -m harness run --python "$PY" --profile "$PROFILE" \
  "${entry_args[@]}" --machine "$MACHINE" --no-report --resume -j "$JOBS" --timeout "$RUN_TIMEOUT"
status=$?
echo "== harness exit status $status after $(( $(date +%s) - started )) s"
case $status in
  0) ;;
  124|130|137) echo "gpu-box: stopped by the ${BUDGET} s budget; run this script again to finish (--resume)" ;;
  *) echo "gpu-box: the harness failed (exit $status)" ;;
esac

if [ ! -s "$RECORDS" ]; then
  echo "gpu-box: no records in $RECORDS"
  exit 1
fi
# what the record file holds, with the reasons of cells that did not run (standard library)
"$PY" - "$RECORDS" <<'PY'
import collections, json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by = collections.Counter((r["device"], r["precision"], r["outcome"]) for r in records)
print("== %d records in %s" % (len(records), sys.argv[1]))
for (device, precision, outcome), n in sorted(by.items()):
    print("  %s-%s %-13s %d" % (device, precision, outcome, n))
reasons = collections.Counter(r["reason"] for r in records if r["outcome"] in ("skipped", "unsupported", "env_failed"))
for reason, n in reasons.most_common(5):
    print("  %d x %s" % (n, reason[:240]))
p = records[-1].get("provenance", {})
print("  gpu %s, driver %s, CUDA %s, compute capability %s" % (
    p.get("gpu"), p.get("driver"), p.get("cuda"), p.get("compute_capability")))
PY
if [ -n "$OUTDIR" ]; then
  mkdir -p "$OUTDIR" && cp "$RECORDS" "$OUTDIR/" && echo "copied to $OUTDIR/$(basename "$RECORDS")"
fi
echo "bring back $RECORDS; then: python -m harness merge $(basename "$RECORDS") && python -m harness report"
[ "$status" -eq 0 ]
