#!/usr/bin/env bash
# Device, session 39, call d (issue 17): call c's kernel library did not
# compile (the host-only bf16 dequantize instantiations sat on
# RLX_INSTANTIATE2 lines, which the CUDA shim's name scan reads whatever the
# #if; now RLX_HOST_INSTANTIATE2), so nothing of gemv1d ran, and the
# session's device time ran out before this script could run. For the next
# session: gemv1d's suite cases on cuda (the kernel tests dispatch it
# directly), memcheck on q4_k / q6_k, then 4096 x 4096 and 640 x 2048 with
# gemv1 (the lowering's default) against gemv1d (GEMV1D=1) at 16 and 8 rows
# a group. If it wins, switch rlx/lowering/quant.py's GEMV1D on and run the
# glu and quant suites on cuda again. Every line goes into the summary as it
# comes (a timeout keeps what ran).
WARM_CACHE=1 . benchmarks/gpu/common.sh
# REAL=the device tool's $OUT, OUT=a scratch folder: only the summary comes back, line by line.
suite "direct rows + glu (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  tests/ops/test_quant.py --rlx-device cuda -k "direct_rows or glu_linear or integer_gemv or gemv1i"
gemv_kernel_bench r4096-gemv1 ONLY_ROWS=4096
gemv_kernel_bench r4096-gemv1d ONLY_ROWS=4096 GEMV1D=1
gemv_kernel_bench r4096-gemv1d-rps1 ONLY_ROWS=4096 ROWS_PER_SIMD=1 GEMV1D=1
gemv_kernel_bench r640-gemv1 ONLY_ROWS=640
gemv_kernel_bench r640-gemv1d ONLY_ROWS=640 GEMV1D=1
SAN_TIMEOUT=50 sanitize memcheck "memcheck gemv1d" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "direct_rows and gemv1d and (q4_k or q6_k) and f32"
[ -n "${REAL:-}" ] && tar czf "$REAL/logs.tgz" -C "$OUT" .
echo "=== summary"; cat "$S"
