#!/usr/bin/env bash
# H200, session 24, third call: the decode GEMVs and split-K attention let
# the next kernel launch only after their own PDL wait (RLX_PDL_LATE_TRIGGER
# 1, prelude/cuda.h; call b ran the early trigger): the norm-GEMV,
# attention and PDL-contract suites on cuda, the tiny Gemma's logits with
# and without the fold, the decode step on the stand-in with PDL (with and
# without the fold) and without PDL, each run's device time beside its wall
# time. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "norm gemv + attention + pdl contract (cuda, gs 0)" c.log tests/ops/test_norm_gemv.py \
  tests/ops/test_attention.py tests/runtime/test_pdl_contract.py --rlx-device cuda
timeout 120 python3 benchmarks/gpu/norm_gemv_check.py "$OUT/norm-gemv-check.json" >"$OUT/norm-gemv-check.log" 2>&1
note "norm gemv check rc=$? $(tail -1 "$OUT/norm-gemv-check.log" | cut -c180-700)"
for pdl in 1 0; do
  without=" ;norm_gemv"; [ "$pdl" = 0 ] && without=""
  RLX_CUDA_PDL=$pdl WITHOUT="$without" KV_DTYPES=f32 timeout 200 python3 benchmarks/gpu/llm_decode_speed.py \
    /tmp/z.gguf "$OUT/llm-speed-pdl$pdl.json" >"$OUT/llm-speed-pdl$pdl.log" 2>&1
  note "llm decode speed PDL=$pdl rc=$?"
  grep '^{' "$OUT/llm-speed-pdl$pdl.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('  without', r['without'], 'pos', r['position'], 'step ms', round(r['step_ms_median'], 4), 'device ms', round(r['device_ms_median'], 4), 'tok/s', round(r['tok_per_s'], 1), 'thunks', r['thunks'])" | tee -a "$S"
done
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
