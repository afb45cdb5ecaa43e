#!/usr/bin/env bash
# Device, session 37, call c (issue 17): gemv1's f32 form with a SIMD group
# a row read straight from the weight (RLX_QGEMV_ROWS_DIRECT through
# KERNEL_DEFINES: lane l on chunks l, l + 32, ...; no stage, no segmented
# scan) against the lowering's pipelined flat passes, CUPTI kernel times at
# 4096 x 4096 (16 and 8 rows a group) and at every shape of the sweep.
WARM_CACHE=0 . benchmarks/gpu/common.sh
gemv_kernel_bench f32rows16 SMALL=0 ONLY_ROWS=4096
gemv_kernel_bench direct16 SMALL=0 ONLY_ROWS=4096 KERNEL_DEFINES="RLX_QGEMV_ROWS_DIRECT=32"
gemv_kernel_bench direct8 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=512 KERNEL_DEFINES="RLX_QGEMV_ROWS_DIRECT=32"
gemv_kernel_bench direct32 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128 F32_FORM=1 KERNEL_DEFINES="RLX_QGEMV_ROWS_DIRECT=32"
gemv_kernel_bench direct-small SMALL=1 KERNEL_DEFINES="RLX_QGEMV_ROWS_DIRECT=32"
gemv_kernel_bench f32rows16-again SMALL=0 ONLY_ROWS=4096
echo "=== summary"; cat "$S"
