#!/usr/bin/env bash
# H200, one device call (issue 21): the sort and splat suites on cuda at the
# device's group size and at 32, racecheck and memcheck on them, then
# benchmarks/gpu/splat_cuda.py. Logs are packed into $OUT/logs.tgz.
source "$(dirname "$0")/common.sh"
SUITES="tests/ops/test_sort.py tests/ops/test_splat.py"
for gs in 0 32; do
  timeout 150 $P $SUITES --rlx-device cuda --rlx-group-size $gs >"$OUT/splat-$gs.log" 2>&1
  note "sort+splat tests (cuda, group size $gs) rc=$? $(tail -1 "$OUT/splat-$gs.log")"
  grep -E "^FAILED|^E " "$OUT/splat-$gs.log" | head -10
done
for tool in racecheck memcheck; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P $SUITES --rlx-device cuda \
    -k "${SAN_K:-centre or depth_order or straddling or sort_matches or chunking}" >"$OUT/splat-$tool.log" 2>&1
  note "splat $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/splat-$tool.log" | tail -1) $(tail -1 "$OUT/splat-$tool.log")"
done
timeout 200 python3 benchmarks/gpu/splat_cuda.py "$OUT/splat_cuda.json" >"$OUT/splat-bench.log" 2>&1
note "splat bench rc=$? $(tail -2 "$OUT/splat-bench.log" | cut -c1-400)"
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . \
  && find . -name '*.log' -delete)
exit 0
