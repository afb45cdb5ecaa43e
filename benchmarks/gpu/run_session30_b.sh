#!/usr/bin/env bash
# H200, session 30, call b: the rope_cache fold in all 18 layers (call a's
# lowering folded only the 9 whose V projection shares the query/key GEMV;
# now the rope moves on to the pair where V is computed after it). Checks:
# the rope_cache and state suites on cuda, racecheck on the fold's tests;
# then the decode step with and without the fold, in both orders under auto
# and once with PDL off, and the PDL-off trace. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
suite "rope_cache + state (cuda, gs 0)" rc.log tests/ops/test_rope_cache.py tests/ops/test_state.py --rlx-device cuda
sanitize racecheck "rope_cache racecheck" rc-race.log tests/ops/test_rope_cache.py --rlx-device cuda
decode_speed auto-ab WITHOUT=" ;rope_cache"
decode_speed auto-ba WITHOUT="rope_cache; "
decode_speed pdl-off-ab WITHOUT=" ;rope_cache" RLX_CUDA_PDL=0
pdl_off_trace 2 9
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
