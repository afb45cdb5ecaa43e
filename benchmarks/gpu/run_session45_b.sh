#!/usr/bin/env bash
# Device, session 45, call b (issue 21): the current splat and sort kernels
# (sessions 43-44) at group sizes 32 and 64 on cuda (the first call ran the
# lowering's own, 0), then a second same-run frame beside gsplat 1.5.3 for
# the ratio's spread (the first: 0.64x / 0.69x at 100k / 1M on an H100).
# Every line goes into the summary as it comes. Carry .gpu_carry.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session45_b.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
wait_warm
sort_splat_suites 32 64
splat_vs_gsplat_step
echo "=== summary"; cat "$S"
