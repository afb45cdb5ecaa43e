#!/usr/bin/env bash
# Device, session 44, call a (issue 21): session 43's vector accesses in the
# projection and binning kernels and session 44's one thread a Gaussian and
# tile tests against the reach, the raster's branchy register form and
# 256-Gaussian batches (shaders/splat.h) on a GPU for the first
# time: the sort and splat suites on cuda at group size 0, the frame beside
# gsplat 1.5.3 with both images on the device, memcheck on the splat
# suite's random scenes (every SH degree) and half-precision scene, then the
# frame's kernel table (where the next stage to speed up is). Every line
# goes into the summary as it comes. Carry .gpu_carry.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session44_a.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
wait_warm
sort_splat_suites 0
splat_vs_gsplat_step
SAN_TIMEOUT=60 sanitize memcheck "memcheck splat (random scenes, f16)" memcheck-splat.log tests/ops/test_splat.py \
  --rlx-device cuda -k "random_scenes or half_precision"
splat_kernels_step
echo "=== summary"; cat "$S"
