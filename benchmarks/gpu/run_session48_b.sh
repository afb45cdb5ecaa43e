#!/usr/bin/env bash
# Device, session 48, call b (issue 18), on the machine call a left warm
# (both kernel libraries cached): rlx against transformers on the stand-in
# with params by value (KERNEL_DEFINES=RLX_PARAMS_BY_VALUE=1; llm_cuda.py
# applies it to rlx's kernels), then at the default (params by pointer).
# Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session48_b.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
trap 'cp "$OUT"/*.json "${REAL:-$OUT}"/ 2>/dev/null' EXIT
( export KERNEL_DEFINES=RLX_PARAMS_BY_VALUE=1; llm_vs_transformers 256 )
cp "$OUT/llm-cuda.json" "$OUT/llm-cuda-by-value.json"
[ "$SECONDS" -lt 300 ] && llm_vs_transformers 256
echo "=== summary"; cat "$S"
