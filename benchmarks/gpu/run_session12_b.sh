#!/usr/bin/env bash
# H200, session 12, second and third calls: the GEMV's x staging issues a thread's
# loads of x (up to RLX_QX_BATCH) before its stores to the tile, in
# rlx_q_stage_x and in glu_linear's rlx_q_stage_x_glu (call a showed the
# down projections 0.8-2.3 us a call slower once they formed the glu: a
# thread's 8 elements of k = 2048 were 8 round trips one after another).
# Suites on cuda at group sizes 0 and 32, memcheck, the decode step with
# and without glu_linear, its PDL-off trace, and the GEMV bench.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "glu + glu_linear (cuda, gs 0)" glu0.log tests/ops/test_glu.py --rlx-device cuda
suite "quant kernels+e2e (gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv + glu (gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  tests/ops/test_glu.py --rlx-device cuda --rlx-group-size 32 -k "gemv or glu"
sanitize memcheck "gemv1 + glu_linear memcheck" memcheck.log tests/ops/test_quant_kernels.py tests/ops/test_glu.py \
  --rlx-device cuda -k "(gemv1 and (q4_k or q5_0 or q8_0)) or glu_linear"
KV_DTYPES=f32 WITHOUT=" ;glu_linear" timeout 120 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed, with and without glu_linear rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-260 | tee -a "$S"
pdl_off_trace 1 11
timeout 60 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
echo "=== summary ==="; cat "$S"
exit 0
