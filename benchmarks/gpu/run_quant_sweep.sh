#!/usr/bin/env bash
# H200, one device call: build, the quant kernel suite on cuda, then
# benchmarks/gpu/quant_gemv_cuda.py once per GEMV rows-per-SIMD-group cap
# given as arguments (0 = the lowering's own choice); SANITIZE=1 adds
# compute-sanitizer memcheck / racecheck / synccheck on the GEMV tests of
# four formats. Carry .gpu_carry.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
python3 -m pip install -q --no-deps --no-index .gpu_carry/gguf-*.whl > /dev/null 2>&1
timeout 300 python3 setup.py build_ext --inplace -q -j 16 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
P="python3 -m pytest -q -p no:cacheprovider"
timeout 120 $P tests/ops/test_quant_kernels.py --rlx-device cuda > $OUT/kernels.log 2>&1; echo "kernels rc=$? $(tail -1 $OUT/kernels.log)"; grep -E "^FAILED|^E " $OUT/kernels.log | head -8
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
