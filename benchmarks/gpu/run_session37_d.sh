#!/usr/bin/env bash
# Device, session 37, call d (issue 17): gemv1's direct rows as the default
# (a SIMD group a weight row of >= 32 chunks, the weight read straight from
# memory; call c's experiment). The build and warm cache, the quant kernel
# and end-to-end suites and the norm + GEMV suite on cuda, the direct-row
# and long-row cases at group size 32, memcheck and racecheck on them, then
# CUPTI kernel times at every shape of the sweep beside PyTorch's bf16 GEMV
# (CUDA graph) and the copy, and 4096 x 4096 with four chunks a lane in
# flight (KERNEL_DEFINES).
. benchmarks/gpu/common.sh
quant_checks "direct rows" "direct_rows or long_rows" "direct_rows or long_rows" "direct_rows and f32 and 256"
suite "norm + gemv (cuda)" normgemv.log tests/ops/test_norm_gemv.py --rlx-device cuda
gemv_kernel_bench default SMALL=1
gemv_kernel_bench unroll4 SMALL=0 ONLY_ROWS=4096 KERNEL_DEFINES="RLX_QGEMV_DIRECT_UNROLL=4"
echo "=== summary"; cat "$S"
