#!/usr/bin/env bash
# H200, one device call (issue 18), speed only: the attention suite on cuda
# (the split-K decode kernels forced by its tests), compute-sanitizer on the
# split-K tests, then the decode profile with split-K on and off
# (llm_profile_cuda.py) and the decode speed against transformers
# (llm_cuda.py, HF_PEERS picks the peers) on a zero-weight stand-in for
# Gemma 3 270M: the real header (.gg/gemma-header.bin, 6.5 MB) extended
# with zeros to the file's size. No kernel's time depends on weight values.
# TOOLS picks the sanitizer tools; BENCH=0 skips llm_cuda.py.
source "$(dirname "$0")/common.sh"
stand_in_model
timeout 200 $P tests/ops/test_attention.py --rlx-device cuda >"$OUT/attention.log" 2>&1
note "attention tests (cuda) rc=$? $(tail -1 "$OUT/attention.log")"; grep -E "^FAILED|^E " "$OUT/attention.log" | head -10
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_attention.py --rlx-device cuda -k "split and f32" >"$OUT/split-$tool.log" 2>&1
  note "split-K $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/split-$tool.log" | tail -1) $(tail -1 "$OUT/split-$tool.log")"
done
timeout 200 python3 benchmarks/gpu/llm_profile_cuda.py /tmp/z.gguf "$OUT/llm-profile.json" >"$OUT/llm-profile.log" 2>&1
note "decode profile rc=$?"; cat "$OUT/llm-profile.log" | head -30
if [ "${BENCH:-1}" = 1 ]; then
  timeout 280 python3 benchmarks/gpu/llm_cuda.py /tmp/z.gguf "$OUT/llm-bench.json" >"$OUT/llm-bench.log" 2>&1
  note "llm bench rc=$?"; tail -30 "$OUT/llm-bench.log"
fi
