#!/usr/bin/env bash
# H200, session 22, third call: how many rows a group repay gemv1i's split
# of x, now that its chunks cost fewer instructions (calls a and b): the
# kernel no longer refuses groups under 32 rows (the lowering's
# GEMV1I_MIN_ROWS decides), so the GEMV bench sweeps it from Python. Rows:
# 4096 x 4096 and the decode-step shapes (1024 x 640, 640 x 2048) at the
# lowering's rows a group, with gemv1i from 8 rows a group, and 4096 x 4096
# with 16 and 32 rows a group. The quant suites on cuda first (gs 0 and 32).
# Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "quant kernels + e2e (cuda, gs 0)" quant.log tests/ops/test_quant_kernels.py tests/ops/test_quant.py --rlx-device cuda
suite "quant kernels (cuda, gs 32)" quant32.log tests/ops/test_quant_kernels.py --rlx-device cuda --rlx-group-size 32
sweep() {   # LABEL ENV...: the bench's kernel-time table under ENV
  local label=$1; shift
  env "$@" KERNEL_TRACE=1 timeout 120 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-$label.json" >"$OUT/gemv-$label.log" 2>&1
  note "== $label ($*) rc=$?"
  python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
for r in d['rows']:
  if r['shape'][0] != 262144: print(r['format'], r['shape'], r['kernel'][:6], r['rows_per_group'], r['correct'], 'kernel us', round(r.get('kernel_rlx_gemv_us', 0), 2), 'copy', round(r.get('kernel_copy_us', 0), 2), 'torch', round(r.get('kernel_torch_us', 0), 2), 'ratio', round(r.get('kernel_rlx_over_torch', 0), 2))
" "$OUT/gemv-$label.json" 2>&1 | tee -a "$S"
}
sweep default SMALL=1 FORMATS="q4_k q5_0 q6_k q8_0 q4_0"
sweep int8rows SMALL=1 GEMV1I_MIN_ROWS=8 FORMATS="q4_k q5_0 q6_k q8_0 q4_0"
sweep int16rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=256 GEMV1I_MIN_ROWS=16
sweep int32rows SMALL=0 ONLY_ROWS=4096 MIN_GROUPS=128
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
