#!/usr/bin/env bash
# H200, session 11, last call: rlx_q_gemv_flat prefetches into L2 the pass
# four passes ahead of the one it decodes (a line a lane), for the tall
# GEMVs' SIMD groups that hold one pass in registers: the GEMV bench, the
# decode step's speed, the quantized-GEMV suites and memcheck on the flat
# forms. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" \
  >"$OUT/llm-speed.log" 2>&1
note "decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
suite "quant kernels+e2e (gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv (gs 64)" quant64.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 64 -k gemv
sanitize memcheck "gemv memcheck" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "(gemv1i or long_rows or many_rows) and (q4_k or q5_0 or q6_k or q8_0 or iq4_xs)"
echo "=== summary ==="; cat "$S"
exit 0
