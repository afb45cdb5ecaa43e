#!/usr/bin/env bash
# H200, one device call (session 7): the kernels changed this session.
# PART=a: build; the quant suites at group sizes 0 and 32 (the flattened
# GEMV), the attention suite (the active-length operand, f16 caches), the
# norm/rope suites and the norm-fusion tests at 0 and 32; the GEMV sweep;
# the decode speed on the zero-weight stand-in (llm_decode_speed.py).
# PART=b: compute-sanitizer on the same kernels, and the decode profile.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
if [ "${PART:-a}" = a ]; then
  timeout 100 $P tests/ops/test_quant_kernels.py --rlx-device cuda >"$OUT/kernels.log" 2>&1
  note "quant kernels rc=$? $(tail -1 "$OUT/kernels.log")"; grep -E "^FAILED" "$OUT/kernels.log" | head -5
  for gs in 0 32; do
    timeout 60 $P tests/ops/test_quant.py --rlx-device cuda --rlx-group-size $gs >"$OUT/quant-$gs.log" 2>&1
    note "quant e2e gs=$gs rc=$? $(tail -1 "$OUT/quant-$gs.log")"; grep -E "^FAILED" "$OUT/quant-$gs.log" | head -3
    timeout 150 $P tests/ops/test_attention.py tests/ops/test_norm.py tests/ops/test_rope.py tests/opt/test_norm_fusion.py \
      tests/ops/test_state.py --rlx-device cuda --rlx-group-size $gs >"$OUT/att-$gs.log" 2>&1
    note "attention+norm+rope+state gs=$gs rc=$? $(tail -1 "$OUT/att-$gs.log")"; grep -E "^FAILED" "$OUT/att-$gs.log" | head -5
  done
  timeout 120 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
  python3 -c "
import json; d=json.load(open('$OUT/gemv.json'))
for r in d['rows']: print(r['format'], r['shape'], r['correct'], round(r['rlx_gemv_us'],1), 'copy', round(r['copy_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch', round(r['torch_bf16_graph_us'],1), 'ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tee -a "$S"
  timeout 150 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
  note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | tee -a "$S"; tail -3 "$OUT/llm-speed.log"
else
  for tool in racecheck memcheck; do
    timeout 100 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_norm.py \
      tests/ops/test_rope.py tests/ops/test_attention.py --rlx-device cuda -k "(rmsnorm_add or rmsnorm_rope or length) and not f16" \
      >"$OUT/san-att-$tool.log" 2>&1
    note "norm/rope/attention-length $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-att-$tool.log" | tail -1) $(tail -1 "$OUT/san-att-$tool.log")"
    timeout 100 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
      --rlx-device cuda -k "gemv and (q8_0 or q4_k) and f32" >"$OUT/san-gemv-$tool.log" 2>&1
    note "gemv $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-gemv-$tool.log" | tail -1) $(tail -1 "$OUT/san-gemv-$tool.log")"
  done
  STEPS=30 timeout 150 python3 benchmarks/gpu/llm_profile_cuda.py /tmp/z.gguf "$OUT/llm-profile.json" >"$OUT/llm-profile.log" 2>&1
  note "decode profile rc=$?"; head -16 "$OUT/llm-profile.log" | tee -a "$S"
fi
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
