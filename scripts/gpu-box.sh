#!/usr/bin/env bash
# The GPU box: run every entry with a variant that may run on CUDA (the four deadends domains
# and the seeds: the gpu-nightly profile's cuda cells) on this machine's preinstalled stack,
# with the `existing` backend (nothing is installed: no package index, no uv needed), the
# most valuable jobs first, and leave ONE record file to bring back and merge.
#
#   bash scripts/gpu-box.sh [--dry-run] [OUTDIR]   # OUTDIR: where a copy of the record file goes
#
# Order and budget are the harness's (`run --budget`, harness/execute/budget.py): each entry's
# baselines (one trial), then one trial of every other variant, then the other trials; the
# plan is cut to what the stored CPU durations (plus a CUDA start per child) say fits the
# budget, and a second call finishes what it left (--resume). --dry-run prints that plan
# (`plan --budget`) and runs nothing.
#
# Needs: a python3 with torch, lightning, packaging, PyYAML and rich (numpy, Pillow, duckdb,
# jinja2 and orjson only for reports). Entries whose `requires:` the stack lacks
# (transformers for the huggingface ones) run where their wheels came with the checkout:
# `bash scripts/gpu-wheels.sh` on a machine with a package index writes .gpu-box/wheels/;
# here they are installed offline
# (pip --no-index) into .gpu-box/venv, a venv that also reads the stack's own packages, which
# then runs everything. Without the folder those variants are `unsupported`, naming what
# is missing. Bounded: GPU_BOX_BUDGET_S (default 600) is the whole call's wall time: the
# harness plans for it less GPU_BOX_MARGIN_S (default 30: the summary, a job that overruns
# its estimate) and is stopped at it less 10 s in any case; each run stops at the profile's
# timeout_s in matrix.yaml (gpu-nightly: 120 s; the reproducers' own waits end before it,
# reprokit.time_left), or after GPU_BOX_RUN_TIMEOUT_S where that is set. Each job's host
# memory is bounded by matrix.yaml's memory_limit_mb (cgroup v2 where the box lets the harness
# make groups, else a watchdog): 8 jobs never take the box.
# Settings (environment): PYTHON (default python3), GPU_BOX_WHEELS (default .gpu-box/wheels),
# GPU_BOX_MACHINE (default gpu-<host>),
# GPU_BOX_ENTRIES (entry globs, default every entry), GPU_BOX_JOBS (default 8),
# GPU_BOX_PROFILE (default gpu-nightly), GPU_BOX_CUDA_START_S (default the harness's, 2 s).
# Then, on the main machine:
#   python -m harness merge gpu-<host>.jsonl && python -m harness report
set -uo pipefail
cd "$(dirname "$0")/.."

# the numbers bash arithmetic reads, checked as plain integers first: $(( )) evaluates a
# value as an expression, and an array index in it runs a command (issue 58)
for setting in GPU_BOX_BUDGET_S GPU_BOX_MARGIN_S GPU_BOX_JOBS; do
  value=${!setting:-}
  if [ -n "$value" ] && ! [[ "$value" =~ ^[0-9]{1,7}$ ]]; then
    echo "gpu-box: $setting=${value:0:40} is not a whole number of at most 7 digits"
    exit 2
  fi
done

# the interpreter itself (not a launcher such as a pyenv shim): it is the environment
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)' 2>/dev/null) \
  || PY=""
[ -n "$PY" ] && [ -x "$PY" ] \
  || { echo "gpu-box: PYTHON=${PYTHON:-python3} is not a Python that runs (set PYTHON to the stack's interpreter)"; exit 2; }
# what the harness itself needs of it, said in one line before anything else runs
missing=$("$PY" -c 'import importlib.util as u
print(" ".join(m for m in ("torch", "lightning", "packaging", "yaml", "rich") if u.find_spec(m) is None and not (m == "lightning" and u.find_spec("pytorch_lightning"))))' 2>/dev/null) \
  || { echo "gpu-box: $PY does not run Python code"; exit 2; }
if [ -n "$missing" ]; then
  echo "gpu-box: $PY lacks $missing (it needs torch, lightning, packaging, PyYAML and rich): set PYTHON to the stack's interpreter"
  exit 2
fi
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi
WHEELS=${GPU_BOX_WHEELS:-.gpu-box/wheels}
if [ -f "$WHEELS/requirements.txt" ]; then
  # the requirements' wheels, offline, into a venv inside the project whose site folder
  # also reads the stack's own (a .pth file: site.addsitedir of each, after the venv's)
  venv=.gpu-box/venv
  rm -rf "$venv"
  if "$PY" -m venv --without-pip "$venv" && site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); then
    "$PY" -c 'import sys
for p in sys.path:
    if p.rstrip("/").endswith(("site-packages", "dist-packages")):
        print("import site; site.addsitedir(%r)" % p)' > "$site/_gpu_box_stack.pth"
    # pip: the interpreter's own, else its base installation's (same Python: --target
    # needs no more), where it is a venv made without pip
    pip=("$PY" -m pip)
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
      base=$("$PY" -c 'import os, sys; print(os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2]))')
      pip=("$base" -m pip)
    fi
    if PIP_ROOT_USER_ACTION=ignore "${pip[@]}" install --quiet --no-index --no-deps --find-links "$WHEELS" --target "$site" \
        -r "$WHEELS/requirements.txt"; then
      PY=$("$venv/bin/python" -c 'import sys; print(sys.executable)')
      echo "gpu-box: $(wc -l < "$WHEELS/requirements.txt") packages of $WHEELS installed in $venv, over $("$PY" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
    else
      echo "gpu-box: installing $WHEELS failed: the variants that need them will be unsupported"
    fi
  else
    echo "gpu-box: $PY cannot make a venv: the wheels of $WHEELS are not installed"
  fi
fi

BUDGET=${GPU_BOX_BUDGET_S:-600}
MARGIN=${GPU_BOX_MARGIN_S:-30}
MACHINE=${GPU_BOX_MACHINE:-gpu-$(hostname -s)}
ENTRIES=${GPU_BOX_ENTRIES:-}
JOBS=${GPU_BOX_JOBS:-8}
PROFILE=${GPU_BOX_PROFILE:-gpu-nightly}
RECORDS="results/records/$MACHINE.jsonl"
OUTDIR=${1:-}
PLANNED=$(( BUDGET > MARGIN + 10 ? BUDGET - MARGIN : 10 ))
HARD=$(( BUDGET > 20 ? BUDGET - 10 : BUDGET ))
budget_args=(--budget "$PLANNED" -j "$JOBS")
timeout_args=()  # the limit per run: matrix.yaml's (the profile's timeout_s) unless set here
if [ -n "${GPU_BOX_RUN_TIMEOUT_S:-}" ]; then timeout_args=(--timeout "$GPU_BOX_RUN_TIMEOUT_S"); fi
if [ -n "${GPU_BOX_CUDA_START_S:-}" ]; then budget_args+=(--cuda-start-s "$GPU_BOX_CUDA_START_S"); fi

echo "== gpu-box $(date -u +%FT%TZ): machine $MACHINE, profile $PROFILE, budget ${BUDGET} s, $PY"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not on this machine"

entry_args=()
for entry in $ENTRIES; do entry_args+=(--entry "$entry"); done
if [ "$DRY_RUN" = 1 ]; then
  exec "$PY" -m harness plan --python "$PY" --profile "$PROFILE" "${entry_args[@]}" \
    --machine "$MACHINE" --resume "${budget_args[@]}"
fi
started=$(date +%s)
log=$(mktemp)
# the harness stops like Ctrl-C on SIGTERM: running children ended, every finished record kept
timeout -k 5 "$HARD" "$PY" -m harness run --python "$PY" --profile "$PROFILE" \
  "${entry_args[@]}" --machine "$MACHINE" --no-report --resume "${budget_args[@]}" \
  "${timeout_args[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "== harness exit status $status after $(( $(date +%s) - started )) s"
case $status in
  0) if grep -q "left for the next call" "$log"; then
       echo "gpu-box: the ${BUDGET} s budget holds only part of the plan; run this script again to finish (--resume)"
     fi ;;
  124|130|137) echo "gpu-box: stopped at the ${BUDGET} s budget; run this script again to finish (--resume)" ;;
  *) echo "gpu-box: the harness failed (exit $status)" ;;
esac
rm -f "$log"

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
