#!/usr/bin/env bash
# H200, session 9, second call: the decode GEMV's two-pass-deep pipeline
# (RLX_QGEMV_DEPTH 2 in shaders/quant.h): the quant suites, memcheck and
# racecheck on gemv1/gemv1i, the GEMV bench; the decode step's speed with and
# without programmatic dependent launch, and its in-graph kernel trace
# without it (true kernel durations). Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
timeout 60 $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda >"$OUT/quant.log" 2>&1
note "quant kernels+e2e (gs 0) rc=$? $(tail -1 "$OUT/quant.log")"; grep -E "^FAILED" "$OUT/quant.log" | head -5
timeout 40 $P tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 64 -k gemv >"$OUT/quant64.log" 2>&1
note "quant gemv (gs 64) rc=$? $(tail -1 "$OUT/quant64.log")"; grep -E "^FAILED" "$OUT/quant64.log" | head -5
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
    --rlx-device cuda -k "gemv1" >"$OUT/$tool.log" 2>&1
  note "gemv1 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1) $(tail -1 "$OUT/$tool.log")"
done
timeout 100 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | tee -a "$S"
RLX_CUDA_PDL=0 KV_DTYPES=f32 timeout 60 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed-nopdl.json" \
  >"$OUT/llm-speed-nopdl.log" 2>&1
note "llm decode speed, PDL off rc=$?"; grep '^{' "$OUT/llm-speed-nopdl.log" | sort -u | tee -a "$S"
RLX_CUDA_PDL=0 timeout 60 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/llm-trace-nopdl.json" \
  >"$OUT/llm-trace.log" 2>&1
note "llm decode trace (PDL off) rc=$?"; grep -v Warn "$OUT/llm-trace.log" | head -40 | cut -c1-160 | tee -a "$S"
timeout 60 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/llm-trace.json" >"$OUT/llm-trace2.log" 2>&1
note "llm decode trace (PDL on) rc=$?"; grep -v Warn "$OUT/llm-trace2.log" | head -20 | cut -c1-160 | tee -a "$S"
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
