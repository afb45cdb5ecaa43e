#!/usr/bin/env bash
# H200, session 14, second call: attention_split_merge with only the splits
# that hold active keys taking part, numbered split-major (a decode step
# early in a 2048-key cache ran 128 splits a row, 9 of them live, behind a
# second wave of idle groups). The attention suite on cuda at group sizes 0
# and 32, memcheck, racecheck and synccheck on the one-dispatch cases with
# a run-time length (every length, then shorter again), the decode step at
# 8, 16 and 32 keys a split against the two-kernel form in the same run,
# and the PDL-off trace. Carry .gpu_carry and .gg/gemma-header.bin.
# (The form timed here was reverted afterwards: benchmarks/README.md, session 14.)
source "$(dirname "$0")/common.sh"
stand_in_model
attention_checks "split_merge live splits" "active_length and split and not split2 and not gqa" \
  memcheck racecheck synccheck
KV_DTYPES=f32 SPLIT_KEYS="8 16 32" WITHOUT=" ;attention_split_merge" timeout 240 python3 \
  benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed rc=$?"
grep '^{' "$OUT/llm-speed.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print('keys', r['split_keys'], 'without', ','.join(r['without']) or '-', r['position'], round(r['step_ms_median'], 4), round(r['step_ms_min'], 4), r['thunks'])
" | tee -a "$S"
pdl_off_trace 2 12
echo "=== summary ==="; cat "$S"
exit 0
