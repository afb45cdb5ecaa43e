#!/usr/bin/env bash
# Device, session 51 (issue 18): the llama-family architectures (Llama,
# Qwen 2, Qwen 3: SwiGLU, interleaved RoPE, q/k/v/output biases, untied
# output) and RoPE's freq_factors (Llama 3's rope_freqs, linear scaling) on
# cuda: the families' suite (the compiled model against the float64 oracle,
# q8_0 and q5_0 projections) at the device's group size and at 32, the RoPE
# suite, and the LLM fuzzer (which now draws those architectures) over more
# seeds; then a Llama 3.2 1B-shaped zero-weight file's decode speed.
# Carry .gpu_carry.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session51.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
trap 'cp "$OUT"/*.log "${REAL:-$OUT}"/ 2>/dev/null' EXIT
suite "llm families (cuda)" families.log tests/models/test_llm_families.py --rlx-device cuda
suite "llm families (cuda, gs 32)" families32.log tests/models/test_llm_families.py --rlx-device cuda \
  --rlx-group-size 32
suite "rope (cuda)" rope.log tests/ops/test_rope.py --rlx-device cuda
timeout 240 $P tests/fuzz/test_fuzz.py -k llm --rlx-device cuda --fuzz-runs "${FUZZ_RUNS:-60}" --fuzz-seed 0 \
  >"$OUT/fuzz.log" 2>&1
note "llm fuzzer (cuda, ${FUZZ_RUNS:-60} seeds from 0) rc=$? $(tail -1 "$OUT/fuzz.log")"
grep -E "^FAILED|Error" "$OUT/fuzz.log" | head -8 | cut -c1-300
# A Llama 3.2 1B-shaped zero-weight file (llama_stand_in.py) decoding on cuda: tok/s at positions 128 and 1900.
python3 benchmarks/gpu/llama_stand_in.py /tmp/l1b.gguf >"$OUT/stand-in.log" 2>&1 && note "$(tail -1 "$OUT/stand-in.log")"
KV_DTYPES=f32 DECODE_BLOCK="1 4" timeout 240 python3 benchmarks/gpu/llm_decode_speed.py /tmp/l1b.gguf \
  "$OUT/llama1b-speed.json" >"$OUT/llama1b-speed.log" 2>&1
note "llama 1B stand-in decode speed rc=$?"; grep '^{' "$OUT/llama1b-speed.log" | cut -c1-200 | tee -a "$S"
echo "=== summary"; cat "$S"
