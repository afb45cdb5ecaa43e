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
llm_vs_transformers 256
SAN_TIMEOUT=150 sanitize memcheck "memcheck rope_cache" mem-rope.log tests/ops/test_rope_cache.py --rlx-device cuda
SAN_TIMEOUT=150 sanitize racecheck "racecheck rope_cache" race-rope.log tests/ops/test_rope_cache.py --rlx-device cuda
rm -f "$OUT"/*.log.keep
echo "=== summary"; cat "$S"
