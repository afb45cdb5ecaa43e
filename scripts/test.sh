#!/usr/bin/env bash
# Set up and run the whole test suite on the CPU (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh test
bash scripts/ensure_clang.sh   # tests/runtime/test_metal_shim.py type-checks the Metal shim with clang
bash scripts/ensure_arm64_tools.sh   # tests/runtime/test_arm64_host.py runs the host kernels for ARM64 under qemu
export HF_HUB_OFFLINE=1      # the parity tests load sentence-transformers from a local folder only
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
