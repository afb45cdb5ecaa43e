#!/usr/bin/env bash
# Device, session 47, call b (issue 18), on call a's warm machine (both
# kernel libraries in its cache): the decode step with and without the
# staged params, alternating; the staged library's suites
# (pytest_defines.py: attention, norm GEMV, rope, rope cache, the quant
# GEMVs); the staged decode step's PDL-off trace; racecheck on the split
# attention with the staging. Each step is skipped once the call is past
# its start deadline (seconds). Carry .gpu_carry and .gg/gemma-header.bin.
# Run as: REAL=$OUT OUT=/tmp/w bash benchmarks/gpu/run_session47_b.sh
WARM_CACHE=0 . benchmarks/gpu/common.sh
stand_in_model
before() { [ "$SECONDS" -lt "$1" ] || { note "skipped past ${1} s: $2"; return 1; }; }
for v in 1 0 1 0; do
  before 300 "decode stage-$v" || break
  if [ $v = 1 ]; then decode_speed "stage-1b" KERNEL_DEFINES=RLX_PARAMS_STAGE=1; else decode_speed "stage-0b"; fi
done
export KERNEL_DEFINES=RLX_PARAMS_STAGE=1
P="python3 benchmarks/gpu/pytest_defines.py -q -p no:cacheprovider"
before 400 "staged suites" && suite "staged: attention + norm gemv + rope + rope cache (cuda)" staged.log \
  tests/ops/test_attention.py tests/ops/test_norm_gemv.py tests/ops/test_rope.py tests/ops/test_rope_cache.py --rlx-device cuda
before 450 "staged quant" && suite "staged: quant GEMVs (cuda)" staged-quant.log tests/ops/test_quant_kernels.py \
  --rlx-device cuda -k "gemv"
before 480 "staged trace" && pdl_off_trace 1 8
before 520 "racecheck" && SAN_TIMEOUT=60 sanitize racecheck "racecheck staged split attention" race-att.log \
  tests/ops/test_attention.py --rlx-device cuda -k "gqa_split_gemma_decode or split_masks_window or gqa_split_masks"
echo "=== summary"; cat "$S"
