#!/usr/bin/env bash
# The GPU box's wheel folder: the packages the entries' `requires:` name (transformers[torch]
# for the huggingface entries) that the box's preinstalled stack lacks, as wheels for its
# Python, downloaded here (the box has no package index). scripts/gpu-box.sh installs them,
# offline, into a venv over the box's own packages (--system-site-packages), and the
# harness then runs those entries' CUDA cells there (harness/envs/installed.py checks each
# variant's requirements against what that interpreter has; nothing else is installed).
#
#   bash scripts/gpu-wheels.sh            # writes .gpu-box/wheels/ (ignored by git)
#
# Carry the folder to the box with the checkout (its size is printed: the box takes 64 MiB
# of carried files in all). Settings (environment): GPU_BOX_PYTHON_VERSION (3.12),
# GPU_BOX_PLATFORM (x86_64-manylinux_2_28), GPU_BOX_STACK (the box's own packages:
# "torch==2.11.0 lightning==2.6.6"), GPU_BOX_REQUIRES (what to add:
# "transformers[torch]==5.24.0"), GPU_BOX_WHEELS (.gpu-box/wheels). Needs uv and pip.
set -euo pipefail
cd "$(dirname "$0")/.."

PYVER=${GPU_BOX_PYTHON_VERSION:-3.12}
PLATFORM=${GPU_BOX_PLATFORM:-x86_64-manylinux_2_28}
STACK=${GPU_BOX_STACK:-torch==2.11.0 lightning==2.6.6}
REQUIRES=${GPU_BOX_REQUIRES:-transformers[torch]==5.24.0}
WHEELS=${GPU_BOX_WHEELS:-.gpu-box/wheels}
case "$WHEELS" in
  /*|*..*) echo "gpu-wheels: GPU_BOX_WHEELS must be a folder inside the project, not $WHEELS"; exit 2 ;;
esac
command -v uv >/dev/null || { echo "gpu-wheels: needs uv (pip install uv)"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf '%s\n' $STACK > "$work/stack.in"
printf '%s\n' $STACK $REQUIRES > "$work/wanted.in"
resolve() {
  uv pip compile --quiet --python-version "$PYVER" --python-platform "$PLATFORM" \
    --no-header --no-annotate "$1" -o "$2"
}
resolve "$work/stack.in" "$work/stack.txt"
resolve "$work/wanted.in" "$work/wanted.txt"
# what the requirements add to the stack, pinned as the resolver chose them with it
names() { sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' "$1" | tr 'A-Z_.' 'a-z--' | sort -u; }
comm -13 <(names "$work/stack.txt") <(names "$work/wanted.txt") > "$work/added"
grep -iE "^($(paste -sd'|' "$work/added"))==" "$work/wanted.txt" > "$work/pinned.txt" || true
[ -s "$work/pinned.txt" ] || { echo "gpu-wheels: the stack already has everything: nothing to download"; exit 0; }

rm -rf "$WHEELS" && mkdir -p "$WHEELS"
abi="cp${PYVER/./}"
plat=$(echo "$PLATFORM" | sed 's/^\(x86_64\|aarch64\)-\(.*\)/\2_\1/')
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$WHEELS" \
  --python-version "$PYVER" --implementation cp --abi "$abi" --abi abi3 --abi none \
  --platform "$plat" --platform "manylinux2014_${PLATFORM%%-*}" --platform any \
  -r "$work/pinned.txt" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
cp "$work/pinned.txt" "$WHEELS/requirements.txt"
echo "gpu-wheels: $(ls "$WHEELS"/*.whl | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1), in $WHEELS for Python $PYVER on $PLATFORM over: $STACK"
sed 's/^/  /' "$WHEELS/requirements.txt"
