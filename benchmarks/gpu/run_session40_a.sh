#!/usr/bin/env bash
# Device, session 40, call a (issue 17): after gemv1d's removal (its
# instantiations, kernel and lowering switch) and the CPU-only GEMV changes
# in shaders/quant_gemv.h, the library builds with NVRTC and the quant, glu
# and norm + GEMV suites pass on cuda at the device's group size and at 32.
WARM_CACHE=1 . benchmarks/gpu/common.sh
suite "quant kernels (cuda, gs 0)" quantk.log tests/ops/test_quant_kernels.py --rlx-device cuda
suite "quant end to end + glu + norm_gemv (cuda, gs 0)" quant.log tests/ops/test_quant.py tests/ops/test_glu.py \
  tests/ops/test_norm_gemv.py --rlx-device cuda
suite "gemv cases (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 32 \
  -k "gemv"
[ -n "${REAL:-}" ] && tar czf "$REAL/logs.tgz" -C "$OUT" .
echo "=== summary"; cat "$S"
