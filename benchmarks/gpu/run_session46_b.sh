#!/usr/bin/env bash
# Device, session 46, call b (issue 18): after call a, on the same warm
# machine: the decode step's PDL-off kernel trace, then rlx's decode
# against transformers (bf16, static cache, compiled CUDA graphs) on the
# stand-in, both at the shipped default (RLX_PARAMS_STAGE off: flip it in
# shaders/prelude/cuda.h first if call a shows the staging faster). Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session46_b.sh
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
pdl_off_trace 1 12
llm_vs_transformers 256
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
echo "=== summary"; cat "$S"
