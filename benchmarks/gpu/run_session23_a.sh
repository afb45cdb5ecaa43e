#!/usr/bin/env bash
# Run at commit 28fbb2c (the form was reverted after this call: no gain; benchmarks/README "H200, session 23").
# H200, session 23, first call: gemv1i's f32 form (QuantGemvParams.x_form
# 1: x as floats, the weights through the asynchronous stage, four groups
# an SM), which the lowering now takes for groups under GEMV1I_MIN_ROWS
# rows: the quant suites on cuda at group sizes 0 and 32, memcheck and
# racecheck on its cases, the GEMV table (CUPTI) with and without it, its
# rows a group at 4096 x 4096, the decode step on the stand-in.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
quant_checks "gemv1i floats" "gemv1i" "gemv1i_of_x_as_floats and (q4_k or q5_0 or q6_k or q8_0)" \
  "gemv1i_of_x_as_floats and (q4_k or q8_0) and 256"
gemv_kernel_bench async SMALL=1
gemv_kernel_bench pipelined SMALL=1 GEMV1I_F32=0
gemv_kernel_bench async8rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=512
gemv_kernel_bench async32rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128
decode_speed_and_trace 1
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
