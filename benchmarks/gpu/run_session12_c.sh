#!/usr/bin/env bash
# H200, session 12, third call: rlx_q_stage_x's batched loads without a
# division per element (call b's form divided each slot's flat index by
# the row pitch, twice, and its Q5_0 GEMVs (k = 640) got slower: 5.56 ->
# 6.23 us a call in the trace). Suites on cuda, the decode step with and
# without glu_linear (twice, alternating), the PDL-off trace.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "glu + quant kernels+e2e (cuda, gs 0)" quant.log tests/ops/test_glu.py tests/ops/test_quant_kernels.py \
  tests/ops/test_quant.py --rlx-device cuda
suite "quant gemv + glu (gs 32)" quant32.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py \
  tests/ops/test_glu.py --rlx-device cuda --rlx-group-size 32 -k "gemv or glu"
KV_DTYPES=f32 WITHOUT=" ;glu_linear; ;glu_linear" timeout 150 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf \
  "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed, with and without glu_linear, twice rc=$?"; grep '^{' "$OUT/llm-speed.log" | cut -c1-200 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 90 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"
python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows'][:1]:
  print('pos', r['position'], 'span', round(r['span_us_median'], 1), 'busy', round(r['busy_us_median'], 1), 'kernels', r['kernels_per_step'])
  for k in r['by_kernel'][:11]: print('  ', k['name'][:40], round(k['calls_per_step'], 1), round(k['mean_us'], 2), round(k['us_per_step'], 1))
" "$OUT/trace.json" 2>&1 | tee -a "$S"
echo "=== summary ==="; cat "$S"
exit 0
