#!/usr/bin/env bash
# Device, session 48, call b (issue 18), on the machine call a left warm
# (its kernel cache built): rlx against transformers on the stand-in with
# params by value (the default now), then the PDL-off trace, then the 4096
# x 4096 GEMVs by value (issue 17). Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session48_b.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
trap 'cp "$OUT"/*.json "${REAL:-$OUT}"/ 2>/dev/null' EXIT
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
llm_vs_transformers 256
before 480 "trace" && pdl_off_trace 1 12
before 520 "gemv bv-1" && gemv_kernel_bench bv-1 ONLY_ROWS=4096
echo "=== summary"; cat "$S"
