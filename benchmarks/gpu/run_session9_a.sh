#!/usr/bin/env bash
# H200, session 9, first call: gsplat built from its wheel in the
# background (its JIT, sm_90 only) while rlx builds; then the quant suites
# and memcheck on the integer GEMV (session 8's final gemv1i/gemv1 split had
# not run on the device), the GEMV bench, the decode step's speed and its
# in-graph kernel trace, and rlx.splat against gsplat. Carry .gpu_carry and
# .gg/gemma-header.bin.
MAX_JOBS=12 GSPLAT=1 source "$(dirname "$0")/common.sh"   # gsplat builds in the background meanwhile
stand_in_model
timeout 60 $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda >"$OUT/quant.log" 2>&1
note "quant kernels+e2e (gs 0) rc=$? $(tail -1 "$OUT/quant.log")"; grep -E "^FAILED" "$OUT/quant.log" | head -5
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
  --rlx-device cuda -k "gemv1i" >"$OUT/memcheck.log" 2>&1
note "gemv1i memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(tail -1 "$OUT/memcheck.log")"
timeout 100 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
gemv_table "$OUT/gemv.json"
KV_DTYPES=f32 timeout 70 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | tee -a "$S"
timeout 60 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/llm-trace.json" >"$OUT/llm-trace.log" 2>&1
note "llm decode trace rc=$?"; head -60 "$OUT/llm-trace.log" | tee -a "$S"
wait $GSPLAT_PID; tail -3 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 150 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-700 "$OUT/splat-gsplat.log" | tail -8 | tee -a "$S"
ls -la /tmp/tx/gsplat_cuda/*.so 2>/dev/null | tee -a "$S"
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
