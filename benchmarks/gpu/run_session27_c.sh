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
# under auto and PDL off; then the norm, state, reduce, rope and quant GEMV
# suites, and the cuda shim suite (its auto case has not finished on a
# GPU). Carry .gpu_carry and .gg/gemma-header.bin. Not run in session 27
# (no device was lent after call b).
source "$(dirname "$0")/common.sh"
stand_in_model
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
pdl_off_trace 2 8
decode_speed auto
decode_speed pdl-off RLX_CUDA_PDL=0
suite "attention (cuda, gs 32)" att32.log tests/ops/test_attention.py --rlx-device cuda --rlx-group-size 32
suite "norm + rope + state + reduce (cuda)" misc.log tests/ops/test_norm.py tests/ops/test_norm_gemv.py tests/ops/test_state.py tests/ops/test_reduce.py tests/ops/test_rope.py --rlx-device cuda
suite "quant kernels (cuda)" quant.log tests/ops/test_quant_kernels.py --rlx-device cuda -k gemv
# The cuda shim suite outruns suite()'s 90 s (session 27, call b: 8 passed when it was stopped).
timeout 300 $P tests/runtime/test_cuda_shim.py >"$OUT/shim.log" 2>&1
note "cuda shim suite (incl. pdl=auto) rc=$? $(tail -1 "$OUT/shim.log")"; grep -E "^FAILED" "$OUT/shim.log" | head -4 | cut -c1-250
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
