#!/usr/bin/env bash
# The second Hugging Face loader for the export tests (tests/export/test_hf_transformers.py):
# PyTorch (CPU build) + transformers in their own venv under $DIR, installed with uv (plain pip without it) from
# their own lock, tests/support/hfloader.lock (every package pinned with its hashes, installed
# with --no-deps: nothing is resolved at install time); rebuilt when that lock changes;
# idempotent. `make hf-loader-lock` re-resolves the lock from tests/support/hfloader.in.
# torch comes from the CPU wheel on this machine's disk ($WHEELS, pip's find-links); PyPI's torch
# for linux x86_64 is the CUDA build (2.73 GB of wheels with its CUDA libraries), never
# downloaded here: without the CPU wheel this writes $DIR/unavailable with the reason and the
# tests skip naming it (in CI too: a deliberate limit). A failed install outside CI also writes
# $DIR/unavailable; in CI it is an error. Writes $DIR/installed.txt (versions, size, seconds).
# Usage: tests/support/hfloader.sh   (DIR=build/hfloader, WHEELS=/opt/wheels by default)
set -euo pipefail
DIR=${BIGTRAIN_HFLOADER_DIR:-$(pwd)/build/hfloader}
WHEELS=${BIGTRAIN_HFLOADER_WHEELS:-/opt/wheels}
PYTHON=${PYTHON:-python3.11}
LOCK=$(cd "$(dirname "$0")" && pwd)/hfloader.lock
VENV=$DIR/venv
INSTALL_LOG=$DIR/install.log
source "$(dirname "$0")/locked_venv.sh"
TORCH=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' "$LOCK")           # e.g. 2.13.0+cpu
# Measured on 2026-11-26 (PyPI's JSON): torch 2.13.0's manylinux x86_64 wheel is 527 MB and it
# pulls 18 CUDA / triton wheels: 2,730 MB to download in all, before unpacking.
CUDA_SIZE="PyPI's torch ${TORCH%+*} for linux x86_64 is the CUDA build: 2.73 GB of wheels (torch 527 MB + 18 CUDA/triton wheels), not downloaded"
mkdir -p "$DIR"

unavailable() {  # $1 reason; $2 "always": skip even in CI (a stated limit, not a failure)
  echo "hfloader: $1" >&2
  if [ -n "${CI:-}" ] && [ "${2:-}" != always ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; exit 0
}

rm -f "$DIR/unavailable"
if cmp -s "$LOCK" "$VENV/installed.lock" && [ -x "$VENV/bin/python" ]; then
  echo "hfloader: $VENV is up to date ($(cat "$DIR/installed.txt" 2>/dev/null || echo "$LOCK"))"
  exit 0
fi
ls "$WHEELS"/torch-"$TORCH"-cp311-*.whl >/dev/null 2>&1 \
  || unavailable "the CPU build of torch $TORCH (torch-$TORCH-cp311-*.whl) is not in $WHEELS (BIGTRAIN_HFLOADER_WHEELS); $CUDA_SIZE" always
echo "hfloader: installing $LOCK into $VENV (torch $TORCH from $WHEELS)"
rm -rf "$VENV"
start=$(date +%s)
: > "$INSTALL_LOG"
locked_venv "$VENV" "$LOCK" --find-links "$WHEELS" \
  || unavailable "installing $LOCK into $VENV failed (see $INSTALL_LOG)"
"$VENV/bin/python" -c "import torch, transformers" 2>>"$DIR/install.log" \
  || unavailable "torch / transformers do not import in $VENV (see $DIR/install.log)"
seconds=$(( $(date +%s) - start ))
versions=$("$VENV/bin/python" -c "import torch, transformers, tokenizers; print(f'torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}')")
echo "$versions; venv $(du -sm "$VENV" | cut -f1) MB; installed in $seconds s" > "$DIR/installed.txt"
cp "$LOCK" "$VENV/installed.lock"
echo "hfloader: $(cat "$DIR/installed.txt")"
