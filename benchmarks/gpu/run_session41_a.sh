#!/usr/bin/env bash
# Device, session 41, call a (issue 21): the sort's histogram and scatter
# ranked with SIMD votes (shaders/sort.h) and the raster's register form
# (shaders/splat.h) on a GPU for the first time:
# - the sort and splat suites on cuda at group sizes 0 and 32;
# - racecheck and memcheck on the sort suite;
# - rlx.splat against gsplat at 100k and 1M Gaussians, 1920 x 1080 (the
#   stages of the frame in the JSON), and the 1M frame as the sort's rows
#   per group change (splat_sort_blocks.py).
# Carry .gpu_carry (gguf, gsplat and plyfile wheels).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session41_a.sh
# (the summary goes to $REAL line by line, so a timeout keeps what ran).
GSPLAT=1 . benchmarks/gpu/common.sh
sort_splat_suites 0
wait $GSPLAT_PID; tail -1 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-1500 "$OUT/splat-gsplat.log" | tail -8 | tee -a "$S"
[ -n "${REAL:-}" ] && cp "$OUT/splat-gsplat.json" "$REAL/" 2>/dev/null
timeout 120 python3 benchmarks/gpu/splat_sort_blocks.py 2048 4096 8192 >"$OUT/sort-blocks.log" 2>&1
note "splat sort rows per block rc=$?"; cut -c1-600 "$OUT/sort-blocks.log" | tail -5 | tee -a "$S"
sort_splat_suites 32
SAN_TIMEOUT=90 sanitize racecheck "racecheck sort" racecheck.log tests/ops/test_sort.py --rlx-device cuda
SAN_TIMEOUT=90 sanitize memcheck "memcheck sort" memcheck.log tests/ops/test_sort.py --rlx-device cuda
[ -n "${REAL:-}" ] && { tar czf "$REAL/logs.tgz" -C "$OUT" --exclude='*.whl' . 2>/dev/null; }
echo "=== summary"; cat "$S"
