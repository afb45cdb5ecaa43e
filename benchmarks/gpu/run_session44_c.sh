#!/usr/bin/env bash
# Device, session 44, call c (issue 21): call a without gsplat (its JIT
# build is the call's long pole), for the last minutes of a session's
# device time: the sort and splat suites on cuda at group size 0, memcheck
# on the splat suite's random scenes and half-precision scene, then the
# frame's kernel table with rlx's device frame times (to compare with an
# earlier run on the same kind of card, not a same-run ratio).
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session44_c.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
sort_splat_suites 0
SAN_TIMEOUT=60 sanitize memcheck "memcheck splat (random scenes, f16)" memcheck-splat.log tests/ops/test_splat.py \
  --rlx-device cuda -k "random_scenes or half_precision"
splat_kernels_step
echo "=== summary"; cat "$S"
