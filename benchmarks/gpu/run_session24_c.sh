#!/usr/bin/env bash
# H200, session 24, third call (did not finish: the session's device time
# ran out during the kernel-library compile of the warm step, which had
# taken 65-97 s in the session's first two calls): an A/B of the PDL
# trigger of the prefetching kernels (the decode GEMVs, split-K attention)
# on the decode step. The first order (default: let the next kernel launch,
# then prefetch and wait) against RLX_PDL_LATE_TRIGGER=1 (prefetch, wait,
# then let it launch; prelude/cuda.h) through KERNEL_DEFINES, and both
# against PDL off (call b: the step 10% faster with PDL off), and
# RLX_CUDA_PDL=auto (written after call c: never run on a GPU yet; the
# serial schedules and the choice; its rows name the mode kept). Then the
# norm-GEMV and PDL-contract suites and the tiny Gemma's logits with the
# fold. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
decode_speed early RLX_CUDA_PDL=1
decode_speed pdl-off RLX_CUDA_PDL=0
decode_speed auto RLX_CUDA_PDL=auto   # each executable times both launch forms over its first runs (launch_mode)
suite "norm gemv + pdl contract + schedules (cuda, gs 0)" c.log tests/ops/test_norm_gemv.py \
  tests/runtime/test_pdl_contract.py tests/cts/test_schedule.py --rlx-device cuda
timeout 120 python3 benchmarks/gpu/norm_gemv_check.py "$OUT/norm-gemv-check.json" >"$OUT/norm-gemv-check.log" 2>&1
note "norm gemv check rc=$? $(tail -1 "$OUT/norm-gemv-check.log" | cut -c180-700)"
# Last: a kernel library of its own to compile (session 24 lost a call to
# such a compile; summary.txt comes back even if this one is cut off).
decode_speed late RLX_CUDA_PDL=1 KERNEL_DEFINES=RLX_PDL_LATE_TRIGGER=1
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
