#!/usr/bin/env bash
# H200, session 11, third call: L2 prefetches before the PDL wait
# (rlx_prefetch_l2: attention_split's K/V rows, gemv1_q / gemv1i_q's first
# 16 KB of weight rows): the decode step's speed and in-graph trace (PDL on:
# the prefetches overlap the previous kernel only then; and off), the
# attention and quantized-GEMV suites on cuda, memcheck on both, the GEMV
# bench. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
KV_DTYPES="f32 f16" timeout 120 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" \
  >"$OUT/llm-speed.log" 2>&1
note "decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace-pdl.json" >"$OUT/trace-pdl.log" 2>&1
note "decode trace (PDL on) rc=$?"; grep -E "^\{|us/step" "$OUT/trace-pdl.log" | head -14 | cut -c1-200 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"; grep -E "^\{|us/step" "$OUT/trace.log" | head -14 | cut -c1-200 | tee -a "$S"
suite "attention (cuda, gs 0)" att0.log tests/ops/test_attention.py --rlx-device cuda
suite "quant kernels+e2e (gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv + attention (gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  tests/ops/test_attention.py --rlx-device cuda --rlx-group-size 32 -k "gemv or split"
sanitize memcheck "gemv1 + split attention memcheck" memcheck.log tests/ops/test_quant_kernels.py \
  tests/ops/test_attention.py --rlx-device cuda -k "(gemv1 and (q4_k or q5_0 or q8_0)) or split_decode"
timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
echo "=== summary ==="; cat "$S"
exit 0
