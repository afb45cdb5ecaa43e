#!/usr/bin/env bash
# H200, session 15, third call: the quant suites on cuda again after the
# K-quant GEMV instantiations went back to plain RLX_INSTANTIATE2 lines
# (inside #ifndef RLX_CPU_INT_KQUANT_GEMV), at the device's group size and
# at 32, and the LLM suites that run quantized weights on cuda. No carry needed.
source "$(dirname "$0")/common.sh"
suite "quant kernels + quant (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant kernels + quant (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda --rlx-group-size 32
suite "gguf on device (cuda)" gguf.log tests/models/test_gguf_on_device.py --rlx-device cuda
echo "=== summary"; cat "$S"
