#!/usr/bin/env bash
# Device, session 31, call a (issue 18): rlx's decode against Hugging Face
# transformers (bf16, static cache, generate's compiled CUDA graphs) in one
# run, on the stand-in file (the real header, zero tensor bytes: no kernel's
# time depends on the weights), with the copy-bandwidth floor; then
# compute-sanitizer on the code of session 30 that ran on a GPU without it:
# rmsnorm_rope_cache after its flag change, the decode-block graphs (chained
# set_rows, device-side argmax feedback) and the split-K merge that takes its
# splits from the active length. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
t0=$(date +%s)
HF_PEERS=hf_static_compiled timeout 300 python3 benchmarks/gpu/llm_cuda.py /tmp/z.gguf "$OUT/llm-cuda.json" 256 \
  >"$OUT/llm-cuda.log" 2>&1
note "llm_cuda (rlx vs transformers static compiled) rc=$? in $(( $(date +%s) - t0 )) s"
python3 -c "
import json, sys; d = json.load(open(sys.argv[1]))
print('gpu', d['gpu'], 'hf', d['hf_source'][:80])
print('rlx decode tok/s', round(d['rlx'].get('decode_tok_s', 0), 1), 'prompt tok/s', round(d['rlx'].get('prefill_tok_s', 0), 1))
for k, v in d['peers'].items(): print(k, {a: (round(b, 4) if isinstance(b, float) else b) for a, b in v.items()})
print('ratios', {k: round(v, 3) for k, v in d.items() if k.startswith('rlx_over')}, 'floor tok/s', round(d['floor_tok_s']), 'fraction of floor', round(d.get('fraction_of_floor', 0), 4))
" "$OUT/llm-cuda.json" 2>&1 | tee -a "$S"
SAN_TIMEOUT=150 sanitize memcheck "memcheck rope_cache" mem-rope.log tests/ops/test_rope_cache.py --rlx-device cuda
SAN_TIMEOUT=150 sanitize racecheck "racecheck rope_cache" race-rope.log tests/ops/test_rope_cache.py --rlx-device cuda
rm -f "$OUT"/*.log.keep
echo "=== summary"; cat "$S"
