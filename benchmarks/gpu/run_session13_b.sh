#!/usr/bin/env bash
# H200, session 13, second call: attention_split_merge at 128 threads was
# slower than the two kernels in call a (13.2 us a call against 8.3 + 4.0;
# step 1.139 against 1.060 ms at position 128). Its merging group has half
# the merge kernel's threads, so each thread walks two features' splits.
# Here: the step with the two kernels and with the one dispatch at 128, 256
# and 512 threads, one run.
# Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
KV_DTYPES=f32 SPLIT_MERGE_THREADS="128 256 512" WITHOUT=" ;attention_split_merge" timeout 300 \
  python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "decode speed rc=$?"
grep '^{' "$OUT/llm-speed.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['split_merge_threads'], r['without'], r['position'], round(r['step_ms_median'], 4), round(r['step_ms_min'], 4), r['thunks'])
" | tee -a "$S"
echo "=== summary ==="; cat "$S"
exit 0
