#!/usr/bin/env bash
# H200, session 21, fourth call: gemv1i's pass copy as one 16-byte cp.async
# a lane a step with the addresses advanced (the unrolled loop's address
# arithmetic was ~80 instructions a lane a pass) and q5_0/q5_1's fifth bits
# spread by one multiply; the quant suites on cuda, memcheck and racecheck
# on the gemv1i cases, the GEMV table at the two large shapes (CUPTI kernel
# times). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
sanitize memcheck "memcheck gemv1i" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv1i and (q4_k or q5_0 or q5_1 or q6_k or q8_0)"
sanitize racecheck "racecheck gemv1i" racecheck.log tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv1i and (q4_k or q5_0) and 256"
gemv_kernel_bench vocabulary SMALL=0
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
