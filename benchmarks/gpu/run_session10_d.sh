#!/usr/bin/env bash
# H200, session 10, last call: rmsnorm_add's register-cached short rows and
# rmsnorm_rope's early position read (norm / rope suites at three group
# sizes, memcheck and racecheck on them), the CPU-chosen grouped-query split
# attention kernel's suites on cuda (attention_split_gqa: never chosen on a
# GPU, but its tests force it), the decode step's speed and trace. Carry
# .gg/gemma-header.bin and .gpu_carry (the gguf wheel).
OUT=${OUT:-/tmp/rlx-out}; mkdir -p "$OUT"
source "$(dirname "$0")/common.sh"
cp .gg/gemma-header.bin /tmp/z.gguf && truncate -s 253113024 /tmp/z.gguf
for gs in 0 64 32; do
  timeout 60 $P tests/ops/test_norm.py tests/ops/test_rope.py tests/ops/test_attention.py --rlx-device cuda --rlx-group-size $gs \
    >"$OUT/suites$gs.log" 2>&1
  note "norm+rope+attention (cuda, gs $gs) rc=$? $(tail -1 "$OUT/suites$gs.log")"; grep -E "^FAILED" "$OUT/suites$gs.log" | head -6 | cut -c1-250
done
KV_DTYPES=f32 timeout 50 python3 benchmarks/gpu/llm_decode_speed.py /tmp/z.gguf "$OUT/llm-speed.json" >"$OUT/llm-speed.log" 2>&1
note "llm decode speed rc=$?"; grep '^{' "$OUT/llm-speed.log" | sort -u | cut -c1-400 | tee -a "$S"
RLX_CUDA_PDL=0 timeout 60 python3 benchmarks/gpu/llm_decode_trace.py /tmp/z.gguf "$OUT/trace.json" >"$OUT/trace.log" 2>&1
note "decode trace (PDL off) rc=$?"
python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
for r in d['rows'][:1]:
  print('pos', r['position'], 'span', round(r['span_us_median'],1), 'busy', round(r['busy_us_median'],1), 'kernels', r['kernels_per_step'])
  for k in r['by_kernel'][:12]: print('  ', k['name'][:40], k['calls_per_step'], round(k['mean_us'],2), round(k['us_per_step'],1))
" "$OUT/trace.json" 2>&1 | tee -a "$S"
timeout 45 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_norm.py tests/ops/test_rope.py \
  --rlx-device cuda -k "rmsnorm" >"$OUT/memcheck.log" 2>&1
note "rmsnorm memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(tail -1 "$OUT/memcheck.log")"
timeout 45 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_norm.py \
  --rlx-device cuda -k "rmsnorm_add or add_rmsnorm or sandwich" >"$OUT/racecheck.log" 2>&1
note "rmsnorm racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log" | tail -1) $(tail -1 "$OUT/racecheck.log")"
echo "=== summary ==="; cat "$S"
exit 0
