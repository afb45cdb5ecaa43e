#!/usr/bin/env bash
# H200 (session 8): the integer form of the decode GEMV (shaders/quant_pieces.h).
# PART=a: build; the quant kernel suite (with the integer-pieces cases) and
# the end-to-end quant suite at the device's group size; the GEMV sweep
# against copy and the torch bf16 graph, then the vocabulary shape at 16
# and 32 rows a SIMD group; compute-sanitizer on the integer-pieces cases;
# the decode speed on the zero-weight stand-in. PART=b: the end-to-end
# suite at group size 32; the decode profile. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
if [ "${PART:-a}" = a ]; then
  timeout 150 $P tests/ops/test_quant_kernels.py --rlx-device cuda >"$OUT/kernels.log" 2>&1
  note "quant kernels rc=$? $(tail -1 "$OUT/kernels.log")"; grep -E "^FAILED|^E  .*bound" "$OUT/kernels.log" | head -8
  timeout 70 $P tests/ops/test_quant.py --rlx-device cuda >"$OUT/quant-0.log" 2>&1
  note "quant e2e gs=0 rc=$? $(tail -1 "$OUT/quant-0.log")"; grep -E "^FAILED" "$OUT/quant-0.log" | head -5
  timeout 120 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
  python3 -c "
import json; d=json.load(open('$OUT/gemv.json'))
for r in d['rows']: print(r['format'], r['shape'], r['correct'], round(r['rlx_gemv_us'],1), 'copy', round(r['copy_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch', round(r['torch_bf16_graph_us'],1), 'ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tee -a "$S"
  for rps in 16 32; do   # rows a SIMD group on the vocabulary shape (the lowering's cap is 8)
    ROWS_PER_SIMD=$rps ONLY_ROWS=262144 timeout 90 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-rps$rps.json" \
      >"$OUT/gemv-rps$rps.log" 2>&1; note "gemv sweep rows/simd=$rps rc=$?"
    python3 -c "
import json; d=json.load(open('$OUT/gemv-rps$rps.json'))
for r in d['rows']: print(r['format'], r['shape'], r['correct'], r['rows_per_group'], round(r['rlx_gemv_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tee -a "$S"
  done
  for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
      --rlx-device cuda -k "integer_pieces and (q4_k or q8_0 or q6_k or q3_k) and 256" >"$OUT/san-$tool.log" 2>&1
    note "integer-pieces $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-$tool.log" | tail -1) $(tail -1 "$OUT/san-$tool.log")"
  done
  KV_DTYPES=f32 timeout 120 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
  note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | tee -a "$S"; tail -3 "$OUT/llm-speed.log"
else
  timeout 70 $P tests/ops/test_quant.py --rlx-device cuda --rlx-group-size 32 >"$OUT/quant-32.log" 2>&1
  note "quant e2e gs=32 rc=$? $(tail -1 "$OUT/quant-32.log")"; grep -E "^FAILED" "$OUT/quant-32.log" | head -5
  STEPS=30 timeout 150 python3 benchmarks/gpu/llm_profile_cuda.py /tmp/z.gguf "$OUT/llm-profile.json" >"$OUT/llm-profile.log" 2>&1
  note "decode profile rc=$?"; head -24 "$OUT/llm-profile.log" | tee -a "$S"
fi
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
