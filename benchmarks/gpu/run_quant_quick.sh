#!/usr/bin/env bash
# H200, one device call (~4 min with a cold build): the quant kernels' checks in
# short (kernels and end to end on cuda at the device's group size and at 32;
# memcheck, racecheck and synccheck on the GEMV of three formats), then
# benchmarks/gpu/quant_gemv_cuda.py. Carry .gpu_carry (the gguf wheel).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
python3 -m pip install -q --no-deps --no-index .gpu_carry/gguf-*.whl > /dev/null 2>&1
timeout 300 python3 setup.py build_ext --inplace -q -j 16 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
P="python3 -m pytest -q -p no:cacheprovider"
timeout 90 $P tests/ops/test_quant_kernels.py --rlx-device cuda > $OUT/kernels.log 2>&1; echo "kernels rc=$? $(tail -1 $OUT/kernels.log)"; grep -E "^FAILED" $OUT/kernels.log | head -5
for gs in 0 32; do timeout 60 $P tests/ops/test_quant.py --rlx-device cuda --rlx-group-size $gs > $OUT/e2e-$gs.log 2>&1; echo "e2e gs=$gs rc=$? $(tail -1 $OUT/e2e-$gs.log)"; grep -E "^FAILED" $OUT/e2e-$gs.log | head -3; done
for tool in memcheck racecheck synccheck; do timeout 70 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py --rlx-device cuda -k "gemv and (q4_k or q8_0 or iq2_xxs) and f32" > $OUT/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1) $(tail -1 $OUT/$tool.log)"; done
timeout 120 python3 benchmarks/gpu/quant_gemv_cuda.py $OUT/gemv.json > $OUT/gemv.log 2>&1; echo "bench rc=$?"
python3 -c "
import json; d=json.load(open('$OUT/gemv.json'))
for r in d['rows']: print(r['format'], r['shape'], r['threads'], r['correct'], round(r['rlx_gemv_us'],1), 'copy', round(r['copy_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch', round(r['torch_bf16_graph_us'],1), 'ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tail -10
