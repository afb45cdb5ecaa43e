#!/usr/bin/env bash
# H200, session 22, third call: how many rows a group repay gemv1i's split
# of x, now that its chunks cost fewer instructions (calls a and b): the
# kernel no longer refuses groups under 32 rows (the lowering's
# GEMV1I_MIN_ROWS decides), so the GEMV bench sweeps it from Python. Rows:
# 4096 x 4096 and the decode-step shapes (1024 x 640, 640 x 2048) at the
# lowering's rows a group, with gemv1i from 8 rows a group, and 4096 x 4096
# with 16 and 32 rows a group. The quant suites on cuda first (gs 0 and 32).
# Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant kernels (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 32
gemv_kernel_bench default SMALL=1 FORMATS="q4_k q5_0 q6_k q8_0 q4_0"
gemv_kernel_bench int8rows SMALL=1 GEMV1I_MIN_ROWS=8 FORMATS="q4_k q5_0 q6_k q8_0 q4_0"
gemv_kernel_bench int16rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256 GEMV1I_MIN_ROWS=16
gemv_kernel_bench int32rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
