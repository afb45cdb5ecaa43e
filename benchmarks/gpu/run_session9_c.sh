#!/usr/bin/env bash
# H200, session 9, last call, most important first (the call may be cut
# short): NVRTC's split compile of the kernel library (the warm-up time),
# the cuda suites of what changed (split argmax, split-K attention, the
# splat sort and scans), the decode step's speed, rlx.splat against gsplat,
# then racecheck / memcheck and the suites at group size 64. Carry
# .gpu_carry and .gg/gemma-header.bin.
MAX_JOBS=8 GSPLAT=1 source "$(dirname "$0")/common.sh"   # gsplat builds in the background meanwhile
stand_in_model
timeout 90 $P tests/ops/test_reduce.py tests/ops/test_attention.py tests/ops/test_sort.py tests/ops/test_splat.py \
  --rlx-device cuda >"$OUT/suites.log" 2>&1
note "reduce+attention+sort+splat (cuda, gs 0) rc=$? $(tail -1 "$OUT/suites.log")"; grep -E "^FAILED" "$OUT/suites.log" | head -8
KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | tee -a "$S"
wait $GSPLAT_PID; tail -2 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-900 "$OUT/splat-gsplat.log" | tail -4 | tee -a "$S"
timeout 60 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_sort.py \
  --rlx-device cuda >"$OUT/racecheck.log" 2>&1
note "sort racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1) $(tail -1 "$OUT/racecheck.log")"
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_reduce.py \
  tests/ops/test_sort.py --rlx-device cuda -k "argmax or sort" >"$OUT/memcheck.log" 2>&1
note "argmax+sort memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(tail -1 "$OUT/memcheck.log")"
timeout 90 $P tests/ops/test_reduce.py tests/ops/test_attention.py tests/ops/test_sort.py tests/ops/test_splat.py \
  --rlx-device cuda --rlx-group-size 64 >"$OUT/suites64.log" 2>&1
note "reduce+attention+sort+splat (cuda, gs 64) rc=$? $(tail -1 "$OUT/suites64.log")"; grep -E "^FAILED" "$OUT/suites64.log" | head -8
exit 0
