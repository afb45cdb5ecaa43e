#!/usr/bin/env bash
# Device, session 43, call e (issue 21): call d cut to what the session's
# last device time holds: the sort and splat suites on cuda, the frame beside
# gsplat 1.5.3 with both images on the device, memcheck on the splat
# suite's random scenes (every SH degree: the 16-byte SH loads and the
# scalar ones) and half-precision scene. Every line goes into the summary as
# it comes. Carry .gpu_carry (the gsplat and plyfile wheels).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session43_e.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
wait_warm
sort_splat_suites 0
splat_vs_gsplat_step
SAN_TIMEOUT=60 sanitize memcheck "memcheck splat (random scenes, f16)" memcheck-splat.log tests/ops/test_splat.py \
  --rlx-device cuda -k "random_scenes or half_precision"
echo "=== summary"; cat "$S"
