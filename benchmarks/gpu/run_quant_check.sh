#!/usr/bin/env bash
# H200, one device call: the GGUF block formats of issue 17 (shaders/quant.h).
#  1. installs the gguf package from .gpu_carry/ (carry it: the device reaches no index) and builds;
#  2. the kernels straight on the shim (tests/ops/test_quant_kernels.py: dequantize exact vs gguf,
#     GEMV m = 1..8 at 1, 32 and 256 threads per group, gather) with --rlx-device cuda;
#  3. quantized weights end to end through rlx.compile on cuda (tests/ops/test_quant.py) at the
#     device's own group size and capped at 32 and 256 threads (--rlx-group-size);
#  4. compute-sanitizer memcheck and racecheck on a subset of both;
#  5. benchmarks/gpu/quant_gemv_cuda.py $OUT/gemv.json (GEMV bandwidth vs copy and PyTorch bf16).
source "$(dirname "$0")/common.sh"
timeout 150 $P tests/ops/test_quant_kernels.py --rlx-device cuda >"$OUT/kernels.log" 2>&1
note "kernels rc=$? $(tail -1 "$OUT/kernels.log")"; grep -E "^FAILED" "$OUT/kernels.log" | head -5
for gs in 0 32 256; do
  timeout 100 $P tests/ops/test_quant.py tests/ir/test_quantized.py --rlx-device cuda --rlx-group-size $gs >"$OUT/e2e-$gs.log" 2>&1
  note "end-to-end group size $gs rc=$? $(tail -1 "$OUT/e2e-$gs.log")"; grep -E "^FAILED" "$OUT/e2e-$gs.log" | head -5
done
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 \
    $P tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda \
    -k "(q4_k or q5_0 or q6_k or q8_0 or iq2_xxs or nvfp4) and not f16" >"$OUT/$tool.log" 2>&1
  note "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1) $(grep -E 'passed|failed' "$OUT/$tool.log" | tail -1)"
done
[ "${SKIP_BENCH:-0}" = 1 ] && { cat "$S"; exit 0; }
timeout 200 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
tail -8 "$OUT/gemv.log" | cut -c1-400
echo "== summary"; cat "$S"
