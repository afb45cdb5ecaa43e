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
splat_vs_gsplat_step
sort_splat_suites 0
stand_in_model
llm_vs_transformers 256
tail -3 "$OUT/llm-cuda.log" | cut -c1-400 | tee -a "$S"
gemv_kernel_bench h200 ONLY_ROWS=4096
[ -n "${REAL:-}" ] && cp "$OUT/gemv-h200.json" "$REAL/" 2>/dev/null
echo "=== summary"; cat "$S"
