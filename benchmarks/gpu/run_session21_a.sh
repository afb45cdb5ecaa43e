#!/usr/bin/env bash
# H200, session 21, first call: the integer GEMV (gemv1i) after its rework
# (passes of up to 64 chunks, two a lane, copied into two shared slots a
# SIMD group by cp.async; x's pieces in 16 KiB beside them): the quant
# suites on cuda, memcheck on the gemv1i cases, then the GEMV table with
# CUPTI kernel times (issue 17: the vocabulary shape at 0.54 / 0.61 / 0.65
# of copy for q4_k / q5_0 / q6_k in session 20). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
sanitize memcheck "memcheck gemv1i" memcheck.log tests/ops/test_quant_kernels.py --rlx-device cuda \
  -k "gemv1i and (q4_k or q5_0 or q6_k or q8_0 or q3_k)"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 200 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1
note "gemv rc=$? in $(( $(date +%s) - t0 )) s"
gemv_table "$OUT/gemv.json"
python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']: print(r['format'], r['shape'], 'kernel us', round(r.get('kernel_rlx_gemv_us', 0), 1), 'copy', round(r.get('kernel_copy_us', 0), 1), 'frac', round(r.get('kernel_fraction_of_copy', 0), 3), 'torch', round(r.get('kernel_torch_us', 0), 1), 'ratio', round(r.get('kernel_rlx_over_torch', 0), 2))
" "$OUT/gemv.json" 2>&1 | tee -a "$S"
tail -5 "$OUT/gemv.log"
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
