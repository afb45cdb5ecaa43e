#!/usr/bin/env bash
# Device, session 31, call c (issue 18): racecheck on the decode-block tests
# that call b's racecheck did not reach inside its time limit (stops inside a
# block, a closed stream, the arguments, the replay without encodes), and on
# the stop case that had passed there. Carry .gpu_carry and .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
SAN_TIMEOUT=240 sanitize racecheck "racecheck decode blocks (the rest)" race-blk2.log tests/models/test_decode_block.py \
  --rlx-device cuda -k "stop_inside or closed_stream or arguments or replays"
echo "=== summary"; cat "$S"
