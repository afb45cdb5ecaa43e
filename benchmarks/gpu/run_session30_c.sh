#!/usr/bin/env bash
# H200, session 30, call c: attention_split_merge's merge counts the splits
# below the active length (RLX_ATT_MERGE_USED_FROM_LENGTH, shaders/
# attention.h) instead of a group reduction for the last split that holds
# keys. Checks: the attention suite on cuda at group sizes 0 and 32,
# memcheck and racecheck on the split-K tests; then the decode step with
# the switch on, off (KERNEL_DEFINES) and on again (the machine's drift
# between them), and the PDL-off trace. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
attention_checks "split-K" "split" memcheck racecheck
decode_speed used-from-length
decode_speed used-by-reduction KERNEL_DEFINES="RLX_ATT_MERGE_USED_FROM_LENGTH=0"
decode_speed used-from-length-again
pdl_off_trace 2 5
rm -f "$OUT"/*.log
echo "=== summary"; cat "$S"
