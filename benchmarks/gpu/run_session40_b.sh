#!/usr/bin/env bash
# Device, session 40, call b (issue 18): the decode step's speed on the
# stand-in file (the real header, zero tensor bytes: no kernel's time
# depends on the weights) at this session's code (gemv1d removed, the
# split scale default since session 39), the f32 cache. Carry .gpu_carry
# and .gg/gemma-header.bin. Not run in session 40: the start was refused and
# the device time left was too short for another try.
WARM_CACHE=1 . benchmarks/gpu/common.sh
stand_in_model
decode_speed session40
[ -n "${REAL:-}" ] && tar czf "$REAL/logs.tgz" -C "$OUT" .
echo "=== summary"; cat "$S"
