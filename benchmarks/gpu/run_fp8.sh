#!/usr/bin/env bash
# H200, one device call (issue 20): the FP8 suite on cuda at the device's
# group size and at 32, and compute-sanitizer memcheck / racecheck on its
# casts and scaled_linear (the GEMV's SIMD-group path runs only on GPUs).
source "$(dirname "$0")/common.sh"
for gs in 0 32; do
  timeout 150 $P tests/ops/test_fp8.py --rlx-device cuda --rlx-group-size $gs >"$OUT/fp8-$gs.log" 2>&1
  note "fp8 tests (cuda, group size $gs) rc=$? $(tail -1 "$OUT/fp8-$gs.log")"; grep -E "^FAILED|^E " "$OUT/fp8-$gs.log" | head -10
done
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_fp8.py --rlx-device cuda -k "scaled_linear or cast_to" >"$OUT/fp8-$tool.log" 2>&1
  note "fp8 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/fp8-$tool.log" | tail -1) $(tail -1 "$OUT/fp8-$tool.log")"
done
