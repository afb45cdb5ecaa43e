#!/usr/bin/env bash
# H200, session 22, first call: rlx_q_gemv_flat's rows summed by one
# segmented scan a pass (gemv1i and gemv1's f32 form): the quant suites on
# cuda at group sizes 0 and 32, memcheck and racecheck on the gemv1i cases,
# the GEMV table with CUPTI kernel times, the decode step on the stand-in.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
python3 benchmarks/gpu/segmented_scan_sim.py 2>&1 | tail -1 | tee -a "$S"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant kernels (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck gemv1i" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv1i and (q4_k or q5_0 or q6_k or q8_0 or q2_k)"
sanitize racecheck "racecheck gemv1i" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv1i and (q4_k or q5_0) and 256"
gemv_kernel_bench vocabulary SMALL=0
decode_speed_and_trace 1
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
