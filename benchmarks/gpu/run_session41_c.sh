#!/usr/bin/env bash
# Device, session 41, call c: the least of run_session41_a.sh for ~5
# minutes of device time: the sort and splat suites on cuda (group size 0),
# the 1M frame's stages at the default rows per group (splat_sort_blocks.py
# 4096), racecheck on the sort suite. No gsplat (its JIT build is ~2 min).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session41_c.sh
. benchmarks/gpu/common.sh
sort_splat_suites 0
timeout 60 python3 benchmarks/gpu/splat_sort_blocks.py 4096 >"$OUT/sort-blocks.log" 2>&1
note "splat 1M stages rc=$?"; cut -c1-600 "$OUT/sort-blocks.log" | tail -3 | tee -a "$S"
SAN_TIMEOUT=60 sanitize racecheck "racecheck sort" racecheck.log tests/ops/test_sort.py --rlx-device cuda
echo "=== summary"; cat "$S"
