#!/usr/bin/env bash
# H200, session 23, third call: the f32 chunk dot with fewer instructions
# (x's tile padded to 36 elements a chunk on CUDA: no address arithmetic a
# load; the scale out of each half's sum for formats without a min term):
# the quant suites on cuda at group sizes 0 and 32, memcheck and racecheck
# on the GEMV cases, the GEMV table (CUPTI kernel times) at all four
# shapes, the decode step on the stand-in. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
quant_checks "gemv" "gemv" "(gemv_matches or long_rows or gemv1i) and (q4_k or q5_0 or q6_k or q8_0) and 256" \
  "(gemv_matches or long_rows) and (q4_k or q8_0) and 256"
gemv_kernel_bench all SMALL=1
decode_speed_and_trace 1
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
