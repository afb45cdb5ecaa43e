#!/usr/bin/env bash
# H200, session 10, last call: rmsnorm_add's register-cached short rows and
# rmsnorm_rope's early position read (norm / rope suites at three group
# sizes, memcheck and racecheck on them), the CPU-chosen grouped-query split
# attention kernel's suites on cuda (attention_split_gqa: never chosen on a
# GPU, but its tests force it), the decode step's speed and trace. Carry
# .gg/gemma-header.bin and .gpu_carry (the gguf wheel).
source "$(dirname "$0")/common.sh"
stand_in_model
for gs in 0 64 32; do
  suite "norm+rope+attention (cuda, gs $gs)" "suites$gs.log" tests/ops/test_norm.py tests/ops/test_rope.py \
    tests/ops/test_attention.py --rlx-device cuda --rlx-group-size $gs
done
decode_speed_and_trace 1
sanitize memcheck "rmsnorm memcheck" memcheck.log tests/ops/test_norm.py tests/ops/test_rope.py --rlx-device cuda -k rmsnorm
sanitize racecheck "rmsnorm racecheck" racecheck.log tests/ops/test_norm.py --rlx-device cuda \
  -k "rmsnorm_add or add_rmsnorm or sandwich"
echo "=== summary ==="; cat "$S"
exit 0
