#!/usr/bin/env bash
# Device, session 44, call b (issues 18 and 17), for an H200 (the issues'
# card): rlx's decode against Hugging Face transformers (bf16, static
# cache, generate's compiled CUDA graphs) on the stand-in with the
# copy-bandwidth floor, then the quantized GEMV's kernel times against the
# copy and torch at both shapes (4096 x 4096 and the 262144 x 640 vocab
# projection). Every line goes into the summary as it comes.
# Carry .gpu_carry (the gguf wheel) and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session44_b.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
llm_vs_transformers 256
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
gemv_kernel_bench h200
[ -n "${REAL:-}" ] && cp "$OUT/gemv-h200.json" "$REAL/" 2>/dev/null
echo "=== summary"; cat "$S"
