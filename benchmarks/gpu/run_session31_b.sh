#!/usr/bin/env bash
# Device, session 31, call b (issue 18): compute-sanitizer on the decode-block
# graphs (tests/models/test_decode_block.py: chained set_rows writes of one
# state, each step's argmax fed to the next on the device) and the split-K
# attention tests (the merge's splits from the active length), then the
# same-machine A/B of that merge change (KERNEL_DEFINES=RLX_ATT_MERGE_USED_FROM_LENGTH=0 / 1
# alternately, the decode step on the stand-in). Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
SAN_TIMEOUT=200 sanitize memcheck "memcheck decode blocks" mem-blk.log tests/models/test_decode_block.py --rlx-device cuda
SAN_TIMEOUT=200 sanitize racecheck "racecheck decode blocks" race-blk.log tests/models/test_decode_block.py --rlx-device cuda
SAN_TIMEOUT=120 sanitize memcheck "memcheck split attention" mem-att.log tests/ops/test_attention.py --rlx-device cuda -k "split or active_length"
SAN_TIMEOUT=120 sanitize racecheck "racecheck split attention" race-att.log tests/ops/test_attention.py --rlx-device cuda -k "split or active_length"
for v in 0 1 0 1; do decode_speed "merge-from-length-$v" KERNEL_DEFINES="RLX_ATT_MERGE_USED_FROM_LENGTH=$v" DECODE_BLOCK=1; done
echo "=== summary"; cat "$S"
