#!/usr/bin/env bash
# H200, session 18, second call (right after call a, on the warm machine):
# the GEMV sweep with CUPTI kernel durations beside the event-timed launches
# (issue 17; session 16's call c never ran), then the decode step's speed and
# its PDL-off kernel trace on the zero-weight stand-in (issue 18). Carry
# .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 240 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >"$OUT/gemv-trace.log" 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
tail -25 "$OUT/gemv-trace.log" | grep -v '^{' | cut -c1-300
python3 benchmarks/gpu/summaries.py gemv-trace "$OUT/gemv-trace.json" 2>&1 | tee -a "$S"
stand_in_model
decode_speed_and_trace 2
echo "=== summary"; cat "$S"
