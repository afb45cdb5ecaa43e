#!/usr/bin/env bash
# H200, one device call (session 7): the pipelined GEMV staging (issue 17)
# and the splat PDL fix (issue 21). Build; the quant kernel suite and the
# end-to-end quant suite at group sizes 0, 32 and 64; memcheck and racecheck
# on the GEMV tests of four formats; the GEMV sweep against copy and the
# torch bf16 graph; the sort and splat suites at the device's group size.
# Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
timeout 150 $P tests/ops/test_quant_kernels.py --rlx-device cuda >"$OUT/kernels.log" 2>&1
note "quant kernels rc=$? $(tail -1 "$OUT/kernels.log")"; grep -E "^FAILED|^E " "$OUT/kernels.log" | head -8
for gs in 0 32 64; do
  timeout 90 $P tests/ops/test_quant.py --rlx-device cuda --rlx-group-size $gs >"$OUT/e2e-$gs.log" 2>&1
  note "quant e2e gs=$gs rc=$? $(tail -1 "$OUT/e2e-$gs.log")"; grep -E "^FAILED" "$OUT/e2e-$gs.log" | head -3
done
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_quant_kernels.py \
    --rlx-device cuda -k "gemv and (q4_k or q8_0 or q5_0 or bf16)" >"$OUT/$tool.log" 2>&1
  note "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1) $(tail -1 "$OUT/$tool.log")"
done
timeout 150 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1; note "gemv bench rc=$?"
python3 -c "
import json; d=json.load(open('$OUT/gemv.json'))
for r in d['rows']: print(r['format'], r['shape'], r['correct'], round(r['rlx_gemv_us'],1), 'copy', round(r['copy_us'],1), 'frac', round(r['fraction_of_copy_bandwidth'],3), 'torch', round(r['torch_bf16_graph_us'],1), 'ratio', round(r['rlx_over_torch'],2))
" 2>&1 | tee -a "$S"
timeout 120 $P tests/ops/test_sort.py tests/ops/test_splat.py tests/runtime/test_pdl_contract.py --rlx-device cuda >"$OUT/splat.log" 2>&1
note "sort+splat (cuda, gs 0) rc=$? $(tail -1 "$OUT/splat.log")"; grep -E "^FAILED" "$OUT/splat.log" | head -5
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude '*.json' --exclude summary.txt . && mv /tmp/logs.tgz . && find . -name '*.log' -delete)
exit 0
