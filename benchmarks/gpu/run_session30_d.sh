#!/usr/bin/env bash
# H200, session 30, call d: decode blocks (LLM(decode_block=n): n greedy
# steps in one launch, each step's argmax fed to the next on the device;
# chained set_rows writes in one graph; sibling projections of shared
# weights merged once) and call c's merge change (the split-K merge counts
# the splits below the active length). Checks: the decode-block, state,
# rope_cache and attention suites on cuda (no sanitizer: the session's
# device time was short after refused starts); then the decode step one token a launch and four a launch
# (a token's share of each launch) and the PDL-off trace. Carry .gpu_carry
# and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "decode block + state + rope_cache (cuda, gs 0)" blk.log tests/models/test_decode_block.py tests/ops/test_state.py tests/ops/test_rope_cache.py --rlx-device cuda
suite "attention (cuda, gs 0)" att.log tests/ops/test_attention.py --rlx-device cuda
decode_speed blocks DECODE_BLOCK="1 4"
pdl_off_trace 1 5
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
