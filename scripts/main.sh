#!/usr/bin/env bash
# The main job: set up, show the devices, run a transformer-style block on
# the CPU device (or $RLX_DEVICE) and check it against the numpy reference.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
.venv/bin/rlx info
.venv/bin/rlx selftest "$@"
