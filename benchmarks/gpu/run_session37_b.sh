#!/usr/bin/env bash
# Device, session 37, call b (issue 17): gemv1i's split of x in batches
# (RLX_QX_SPLIT_BATCH chunks a SIMD group at a time, their loads issued
# together and the next batch's ahead) where it took one chunk at a time.
# The question: was the split's latency (16 chunks a SIMD group at k =
# 4096, each an L2 round trip and ~15 dependent shuffles) what kept gemv1i
# at 17-20 us on a 4096 x 4096 weight (gemv1's f32 form 11-13, PyTorch's
# bf16 GEMV ~10)? The build, the quant suites with memcheck and racecheck
# on the gemv1i cases, then CUPTI kernel times at 4096 x 4096: gemv1's f32
# form (the lowering's choice), gemv1i at 8 / 16 / 32 rows a group, gemv1i
# at 16 rows with one chunk at a time (KERNEL_DEFINES), and every shape
# with gemv1i from 8 rows (the decode step's shapes and the vocabulary).
. benchmarks/gpu/common.sh
quant_checks "gemv1i" "gemv1i" "gemv1i" "gemv1i"
gemv_kernel_bench f32rows16 SMALL=0 ONLY_ROWS=4096
gemv_kernel_bench int8rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=512 GEMV1I_MIN_ROWS=8
gemv_kernel_bench int16rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256 GEMV1I_MIN_ROWS=8
gemv_kernel_bench int32rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128 GEMV1I_MIN_ROWS=8
gemv_kernel_bench small-int SMALL=1 GEMV1I_MIN_ROWS=8
gemv_kernel_bench small-default SMALL=1
gemv_kernel_bench int16rows-batch1 SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256 GEMV1I_MIN_ROWS=8 \
  KERNEL_DEFINES="RLX_QX_SPLIT_BATCH=1u"
echo "=== summary"; cat "$S"
