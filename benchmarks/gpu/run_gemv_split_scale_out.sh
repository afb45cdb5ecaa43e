#!/usr/bin/env bash
# Device, for the session after 37 (issue 17): q6_k (and q3_k) with each
# half's scale out of that half's sum (RLX_QDOT_SPLIT_SCALE_OUT=1 through
# KERNEL_DEFINES; shaders/quant_pieces.h) against the default one FMA a
# weight, CUPTI kernel times at 4096 x 4096 and the decode step's shapes,
# beside PyTorch's bf16 GEMV. q6_k was the one format at parity (1.00x)
# with PyTorch at 4096 x 4096 after session 37's direct rows. The CPU
# harness checks both forms (tests/ops/test_quant_pieces_host.py).
WARM_CACHE=0 . benchmarks/gpu/common.sh
gemv_kernel_bench default SMALL=1 FORMATS="q6_k q3_k"
gemv_kernel_bench split-scale-out SMALL=1 FORMATS="q6_k q3_k" KERNEL_DEFINES="RLX_QDOT_SPLIT_SCALE_OUT=1"
echo "=== summary"; cat "$S"
