#!/usr/bin/env bash
# Set up and run the whole test suite on the CPU (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
# The system tools come from apt while pip installs and builds rlx: apt waits
# on the network and the disk, the build on the CPU, so on a fresh machine
# the two overlap instead of adding up.
#   ensure_clang.sh: tests/runtime/test_metal_shim.py type-checks the Metal shim with clang
#   ensure_arm64_tools.sh: tests/runtime/test_arm64_host.py runs the host kernels for ARM64 under qemu
tools_log=$(mktemp)
( bash scripts/ensure_clang.sh; bash scripts/ensure_arm64_tools.sh ) >"$tools_log" 2>&1 &
tools=$!
bash scripts/setup_env.sh test
wait "$tools" || true
cat "$tools_log" >&2; rm -f "$tools_log"
export HF_HUB_OFFLINE=1      # the parity tests load sentence-transformers from a local folder only
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
