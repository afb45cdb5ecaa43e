#!/usr/bin/env bash
# Device, session 47, call c (issues 20 and 18): where cuBLASLt refuses
# outer-vector FP8 scales (lt_outer_probe.py, PROBE_STEPS=1: each attribute
# and mode pair, and the heuristic), then rlx against transformers on the
# stand-in at the shipped defaults. Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session47_c.sh
WARM_CACHE=bg . benchmarks/gpu/common.sh
stand_in_model
PROBE_STEPS=1 PROBE_POINTERS=${PROBE_POINTERS:-0} timeout 60 python3 benchmarks/gpu/lt_outer_probe.py "$OUT/lt-steps.json" >"$OUT/lt-steps.log" 2>&1
note "lt_outer_probe steps rc=$?"; cut -c1-200 "$OUT/lt-steps.log" | tee -a "$S"
wait_warm
llm_vs_transformers 256
echo "=== summary"; cat "$S"
