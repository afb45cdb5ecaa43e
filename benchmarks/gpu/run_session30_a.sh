#!/usr/bin/env bash
# H200, session 30, call a: rmsnorm_rope_cache (a decoder layer's query/key
# norm and RoPE with its K and V cache writes in one dispatch,
# rlx/lowering/rope_cache.py). Checks: its suite with the state and rope
# suites on cuda at group sizes 0 and 32, memcheck and racecheck on it, the
# tiny-model suite on cuda; then the decode step with and without the fold
# in one run (WITHOUT=" ;rope_cache") under auto and with PDL off, and the
# PDL-off trace. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "rope_cache + state + rope (cuda, gs 0)" rc.log tests/ops/test_rope_cache.py tests/ops/test_state.py tests/ops/test_rope.py --rlx-device cuda
suite "rope_cache + state + rope (cuda, gs 32)" rc32.log tests/ops/test_rope_cache.py tests/ops/test_state.py tests/ops/test_rope.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "rope_cache memcheck" rc-mem.log tests/ops/test_rope_cache.py --rlx-device cuda
sanitize racecheck "rope_cache racecheck" rc-race.log tests/ops/test_rope_cache.py --rlx-device cuda
decode_speed auto-ab WITHOUT=" ;rope_cache"
decode_speed pdl-off-ab WITHOUT=" ;rope_cache" RLX_CUDA_PDL=0
pdl_off_trace 2 9
timeout 150 $P tests/models/test_llm.py --rlx-device cuda -x >"$OUT/llm.log" 2>&1
note "tiny-model suite (cuda) rc=$? $(tail -1 "$OUT/llm.log")"; grep -E "^FAILED|^E " "$OUT/llm.log" | head -6 | cut -c1-250
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
