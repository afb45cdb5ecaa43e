#!/usr/bin/env bash
# Device, session 43, call b (issue 21): the sort's loads ahead of its votes,
# its scatter written through group memory and its scans staged
# (shaders/sort.h) — the sort and splat suites on cuda at group sizes 0 and
# 32, where a 1M-Gaussian frame spends its GPU time (splat_kernels.py), the
# frame beside gsplat 1.5.3 with both images on the device, then racecheck
# and memcheck on the sort suite. Every line goes into the summary as it
# comes (a timeout keeps what ran).
# Carry .gpu_carry (the gsplat and plyfile wheels).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session43_b.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
wait_warm
sort_splat_suites 0 32
timeout 150 python3 benchmarks/gpu/splat_kernels.py "$OUT/splat-kernels.json" >"$OUT/splat-kernels.log" 2>&1
note "splat_kernels rc=$?"
python3 benchmarks/gpu/summaries.py splat-kernels "$OUT/splat-kernels.json" 2>&1 | tee -a "$S"
[ -n "${REAL:-}" ] && cp "$OUT/splat-kernels.json" "$REAL/" 2>/dev/null
splat_vs_gsplat_step
SAN_TIMEOUT=90 sanitize racecheck "racecheck sort" racecheck-sort.log tests/ops/test_sort.py --rlx-device cuda
SAN_TIMEOUT=90 sanitize memcheck "memcheck sort" memcheck-sort.log tests/ops/test_sort.py --rlx-device cuda
echo "=== summary"; cat "$S"
