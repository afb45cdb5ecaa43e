#!/usr/bin/env bash
# H200, one device call: the top-k and repetition-penalty suites on cuda (at
# the device's group size and at 32; the tests force the tiled top-k path),
# the FP8 x FP8 gemm steps of run_fp8.sh (FP8_STEPS=gemm: capability, suite,
# memcheck, benchmark against torch._scaled_mm), then racecheck on the tiled
# top-k. A step starts only while DEADLINE seconds (default 540) have not
# passed since the script began, so the call's limit never cuts the packing:
# logs go into $OUT/logs.tgz (a call brings back at most 8 files), the JSON
# results and the summary stay beside it.
START=$(date +%s)
source "$(dirname "$0")/common.sh"
DEADLINE=${DEADLINE:-540}
time_left() { [ $(( $(date +%s) - START )) -lt "$DEADLINE" ] || { note "skipped (deadline): $*"; return 1; }; }
topk_suite() {
  time_left "topk group size $1" || return
  timeout 150 $P tests/ops/test_topk.py tests/ops/test_penalty.py --rlx-device cuda --rlx-group-size "$1" \
    >"$OUT/topk-$1.log" 2>&1
  note "topk+penalty tests (cuda, group size $1) rc=$? $(tail -1 "$OUT/topk-$1.log")"
  grep -E "^FAILED|^E " "$OUT/topk-$1.log" | head -10
}
topk_suite 0
cp "$S" "$OUT/summary-topk.txt"
if time_left "fp8 gemm steps"; then
  WARM_CACHE=0 FP8_STEPS=gemm bash "$(dirname "$0")/run_fp8.sh"
  cp "$S" "$OUT/summary-fp8.txt"
fi
: >"$S"
topk_suite 32
if time_left "topk racecheck"; then
  timeout 90 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_topk.py \
    --rlx-device cuda -k "vocabulary or ties" >"$OUT/topk-racecheck.log" 2>&1
  note "topk racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/topk-racecheck.log" | tail -1) $(tail -1 "$OUT/topk-racecheck.log")"
fi
cat "$OUT"/summary-topk.txt "$OUT"/summary-fp8.txt "$S" 2>/dev/null >"$OUT/summary-all.txt"
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary-all.txt . && mv /tmp/logs.tgz . \
  && find . -name '*.log' -delete && rm -f summary.txt summary-topk.txt summary-fp8.txt)
exit 0
