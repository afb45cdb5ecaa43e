#!/usr/bin/env bash
# H200, session 22, second call: the stage's code words read by shared
# loads (rlx_qi_words without an integer round trip of the pointer, which
# had made them generic 64-bit loads) and q4_k/q5_k codes as whole 16-byte
# vectors in gemv1i's aligned stages; with call a's segmented scan. The
# quant suites on cuda at group sizes 0 and 32, memcheck on the gemv1i and
# gemv1 cases, racecheck on gemv1i, the GEMV table with CUPTI kernel times,
# the decode step on the stand-in. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant kernels (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck gemv1i" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv1i and (q4_k or q5_k or q5_0 or q6_k or q8_0 or q2_k)"
sanitize memcheck "memcheck gemv" memcheck-gemv.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv and not gemv1i and (q4_k or q5_k or q5_0 or q3_k) and f32"
sanitize racecheck "racecheck gemv1i" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv1i and (q4_k or q5_k or q5_0) and 256"
gemv_kernel_bench vocabulary SMALL=0
decode_speed_and_trace 1
rm -f "$OUT"/trace.json "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
