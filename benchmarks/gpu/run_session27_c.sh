#!/usr/bin/env bash
# H200, session 27, call c: two changes from call b's Nsight Compute source
# page of attention_split_merge, where five dependent reads of the params
# struct / active length and the fences round the count held most stall
# samples: (1) rlx_params_prefetch (prelude/cuda.h) requests every sector of
# the params struct at the entry of the decode step's kernels; (2) the
# split-merge count is one acquire-release add by one thread after the group
# barrier, in place of a fence by every thread, the add and a second fence.
# Checks: the attention suite on cuda (group sizes 0 and 32), the decode
# step's PDL-off trace (us a kernel call against call b) and the decode step
# under auto and PDL off; then the quant GEMV suite and racecheck on the
# split-merge cases. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
pdl_off_trace 2 8
decode_speed auto
decode_speed pdl-off RLX_CUDA_PDL=0
suite "attention (cuda, gs 32)" att32.log tests/ops/test_attention.py --rlx-device cuda --rlx-group-size 32
suite "norm + rope + state + reduce (cuda)" misc.log tests/ops/test_norm.py tests/ops/test_norm_gemv.py tests/ops/test_state.py tests/ops/test_reduce.py tests/ops/test_rope.py --rlx-device cuda
suite "quant kernels (cuda)" quant.log tests/ops/test_quant_kernels.py --rlx-device cuda -k gemv
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
