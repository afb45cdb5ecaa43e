#!/usr/bin/env bash
# H200, one device call: build, the quant kernel suite on cuda, then
# benchmarks/gpu/quant_gemv_cuda.py once per GEMV rows-per-SIMD-group cap
# given as arguments (0 = the lowering's own choice). E2E=1 adds the
# end-to-end quant suite at the device's group size and at 32; SANITIZE=1
# compute-sanitizer memcheck / racecheck / synccheck on the GEMV tests of
# four formats. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
timeout 120 $P tests/ops/test_quant_kernels.py --rlx-device cuda > $OUT/kernels.log 2>&1; echo "kernels rc=$? $(tail -1 $OUT/kernels.log)"; grep -E "^FAILED|^E " $OUT/kernels.log | head -8
if [ "${E2E:-0}" = 1 ]; then
  for gs in 0 32; do timeout 60 $P tests/ops/test_quant.py --rlx-device cuda --rlx-group-size $gs > $OUT/e2e-$gs.log 2>&1; echo "e2e gs=$gs rc=$? $(tail -1 $OUT/e2e-$gs.log)"; grep -E "^FAILED" $OUT/e2e-$gs.log | head -3; done
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do timeout 80 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv and (q4_k or q8_0 or iq2_xxs or bf16) and f32" > $OUT/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1) $(tail -1 $OUT/$tool.log)"; done
fi
for rps in "$@"; do
  ROWS_PER_SIMD=$rps timeout 150 python3 benchmarks/gpu/quant_gemv_cuda.py $OUT/gemv-$rps.json > $OUT/gemv-$rps.log 2>&1; echo "bench rows_per_simd=$rps rc=$?"
  python3 -c "
import json; d=json.load(open('$OUT/gemv-$rps.json'))
for r in d['rows']: print(r['format'], r['shape'], r['rows_per_group'], r['correct'], round(r['rlx_gemv_us'],1), 'copy', round(r['copy_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch', round(r['torch_bf16_graph_us'],1), 'ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tail -10
done
