#!/usr/bin/env bash
# Device, session 39, call d (issue 17): call c's kernel library did not
# compile (the host-only bf16 dequantize instantiations sat on
# RLX_INSTANTIATE2 lines, which the CUDA shim's name scan reads whatever the
# #if; now RLX_HOST_INSTANTIATE2), so nothing of gemv1d ran. With the ~330
# s of device time left, the lean form of call c: gemv1d's suite cases on
# cuda, memcheck on q4_k / q6_k, then 4096 x 4096 and 640 x 2048 with
# gemv1 (GEMV1D=0) against gemv1d at 16 and 8 rows a group. Every line goes
# into the summary as it comes (a timeout keeps what ran).
WARM_CACHE=1 . benchmarks/gpu/common.sh
# REAL=the device tool's $OUT, OUT=a scratch folder: only the summary comes back, line by line.
if [ -n "${REAL:-}" ]; then cp "$S" "$REAL/summary.txt"; S="$REAL/summary.txt"; fi
suite "direct rows + glu (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  tests/ops/test_quant.py --rlx-device cuda -k "direct_rows or glu_linear or integer_gemv or gemv1i"
gemv_kernel_bench r4096-gemv1 ONLY_ROWS=4096 GEMV1D=0
gemv_kernel_bench r4096-gemv1d ONLY_ROWS=4096
gemv_kernel_bench r4096-gemv1d-rps1 ONLY_ROWS=4096 ROWS_PER_SIMD=1
gemv_kernel_bench r640-gemv1 ONLY_ROWS=640 GEMV1D=0
gemv_kernel_bench r640-gemv1d ONLY_ROWS=640
SAN_TIMEOUT=50 sanitize memcheck "memcheck gemv1d" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "direct_rows and gemv1d and (q4_k or q6_k) and f32"
[ -n "${REAL:-}" ] && tar czf "$REAL/logs.tgz" -C "$OUT" .
echo "=== summary"; cat "$S"
