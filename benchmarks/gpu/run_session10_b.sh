#!/usr/bin/env bash
# H200, session 10, second call: the f32 GEMV's chunk dot from the formats'
# int8 codes (RlxQDotCodes, shaders/quant_pieces.h) in place of the float
# decoders: the quant suites at two group sizes, memcheck and racecheck on
# the GEMV, the GEMV bench (also the f32 form where gemv1i is the default),
# the decode step's speed and in-graph trace, Nsight Compute on the 4096 x
# 4096 Q4_K GEMV. Carry .gg/gemma-header.bin and .gpu_carry (the gguf wheel).
source "$(dirname "$0")/common.sh"
stand_in_model
suite "quant kernels+e2e (gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
gemv_benches
decode_speed_and_trace
FORMATS=q4_k SMALL=0 timeout 60 ncu --clock-control none -k regex:gemv --section SpeedOfLight --section WarpStateStats \
  --section InstructionStats --launch-count 2 python3 benchmarks/gpu/quant_gemv_cuda.py >"$OUT/ncu-q4_k.log" 2>&1
note "ncu q4_k rc=$?"; grep -E "Duration|DRAM Throughput|Executed Instructions  |Warp Cycles Per Issued|gemv" "$OUT/ncu-q4_k.log" \
  | sed 's/  */ /g' | cut -c1-120 | tee -a "$S"
for gs in 64 32; do
  suite "quant gemv (gs $gs)" "quant$gs.log" tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size $gs -k gemv
done
sanitize memcheck "gemv1 memcheck" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv1 and (q4_k or q5_0 or q6_k or q8_0 or q3_k)"
sanitize racecheck "gemv1 racecheck" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv1 and (q4_k or q5_0)"
echo "=== summary ==="; cat "$S"
exit 0
