#!/usr/bin/env bash
# Device, session 41, call b: run_session41_a.sh's steps for a short
# budget, the peer comparison first. The kernel library's first compile
# runs in the background beside gsplat's JIT build; then rlx.splat against
# gsplat (100k and 1M Gaussians, 1920 x 1080, with each stage's time), the
# sort and splat suites on cuda, racecheck on the sort suite.
# Carry .gpu_carry (gguf, gsplat and plyfile wheels).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session41_b.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
splat_vs_gsplat_step
sort_splat_suites 0
SAN_TIMEOUT=90 sanitize racecheck "racecheck sort" racecheck.log tests/ops/test_sort.py --rlx-device cuda
sort_splat_suites 32
echo "=== summary"; cat "$S"
