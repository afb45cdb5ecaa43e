#!/usr/bin/env bash
# The main job: set up, show the devices, then embed two sentences with the
# real all-MiniLM-L6-v2 (a 6-layer BERT) on the CPU device (or $RLX_DEVICE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
.venv/bin/rlx info
.venv/bin/rlx embed "hello world" "rlx runs transformer inference" "$@"
