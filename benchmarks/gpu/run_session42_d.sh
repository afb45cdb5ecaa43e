#!/usr/bin/env bash
# Device, session 42, call d: only rlx's decode against Hugging Face
# transformers (bf16, static cache, generate's compiled CUDA graphs) with
# the copy-bandwidth floor, on the stand-in (issue 18): what the session's
# last device minutes hold. The kernel library compiles inside llm_cuda.py.
# Carry .gpu_carry (the gguf wheel) and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session42_d.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
stand_in_model
llm_vs_transformers 256
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
echo "=== summary"; cat "$S"
