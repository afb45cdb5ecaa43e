#!/usr/bin/env bash
# Device, session 43, call d (issue 21): the projection's record in four
# 16-byte stores and its SH rows in 16-byte loads, the binning's record
# loads and pair stores as vectors (shaders/splat.h, rlx_f4 / rlx_i2_store
# in the preludes) — the sort and splat suites on cuda at group sizes 0 and
# 32, the frame beside gsplat 1.5.3 with both images on the device,
# memcheck on the splat suite (the vector accesses' alignment), then the
# frame's kernel table. Every line goes into the summary as it comes.
# Carry .gpu_carry (the gsplat and plyfile wheels).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session43_d.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
wait_warm
sort_splat_suites 0 32
splat_vs_gsplat_step
SAN_TIMEOUT=100 sanitize memcheck "memcheck splat" memcheck-splat.log tests/ops/test_splat.py --rlx-device cuda
splat_kernels_step
echo "=== summary"; cat "$S"
