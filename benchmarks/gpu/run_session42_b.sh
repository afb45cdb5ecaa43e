#!/usr/bin/env bash
# Device, session 42, call b: call a's splat comparison again with each
# side's image left on the device too (rlx's schedule replayed with no
# copies beside gsplat's frame; issue 21) and the sort and splat suites on
# this GPU, then rlx's decode against Hugging
# Face transformers (bf16, static cache, generate's compiled CUDA graphs) on
# the stand-in with the copy-bandwidth floor (issue 18), then the quantized
# GEMV's kernel times against the copy and torch (issue 17). Every line goes
# into the summary as it comes (a timeout keeps what ran).
# Carry .gpu_carry (gguf, gsplat and plyfile wheels) and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session42_b.sh
GSPLAT=1 WARM_CACHE=bg . benchmarks/gpu/common.sh
if [ -n "${REAL:-}" ]; then cp "$S" "$REAL/summary.txt"; S="$REAL/summary.txt"; fi
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
wait_warm
wait $GSPLAT_PID; tail -1 "$OUT/gsplat-build.log" | tee -a "$S"
timeout 180 python3 benchmarks/gpu/splat_vs_gsplat.py "$OUT/splat-gsplat.json" >"$OUT/splat-gsplat.log" 2>&1
note "splat vs gsplat rc=$?"; cut -c1-3000 "$OUT/splat-gsplat.log" | tail -3 | tee -a "$S"
[ -n "${REAL:-}" ] && cp "$OUT/splat-gsplat.json" "$REAL/" 2>/dev/null
suite "sort + splat (cuda, gs 0)" splat.log tests/ops/test_sort.py tests/ops/test_splat.py --rlx-device cuda
stand_in_model
t0=$(date +%s)
HF_PEERS=hf_static_compiled timeout 300 python3 benchmarks/gpu/llm_cuda.py /tmp/z.gguf "$OUT/llm-cuda.json" 256 \
  >"$OUT/llm-cuda.log" 2>&1
note "llm_cuda (rlx vs transformers static compiled) rc=$? in $(( $(date +%s) - t0 )) s"
[ -n "${REAL:-}" ] && cp "$OUT/llm-cuda.json" "$REAL/" 2>/dev/null
python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
print('gpu', d['gpu'], 'hf', d['hf_source'][:80])
print('rlx decode tok/s', round(d['rlx'].get('decode_tok_s', 0), 1), 'prompt tok/s', round(d['rlx'].get('prefill_tok_s', 0), 1))
for k, v in d['peers'].items(): print(k, {a: (round(b, 4) if isinstance(b, float) else b) for a, b in v.items()})
print('ratios', {k: round(v, 3) for k, v in d.items() if k.startswith('rlx_over')}, 'floor tok/s', round(d['floor_tok_s']), 'fraction of floor', round(d.get('fraction_of_floor', 0), 4))
" "$OUT/llm-cuda.json" 2>&1 | tee -a "$S"
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
gemv_kernel_bench h200 ONLY_ROWS=4096
[ -n "${REAL:-}" ] && cp "$OUT/gemv-h200.json" "$REAL/" 2>/dev/null
echo "=== summary"; cat "$S"
