#!/usr/bin/env bash
# H200, session 26, call c: why RLX_CUDA_PDL=auto's decode step took 0.892
# ms on the host where RLX_CUDA_PDL=0 took 0.831 (call b), with device
# times within 1% (0.817 / 0.808 ms) and auto having chosen the serial
# schedules. The shim rebuilt with -DRLX_CUDA_PHASE_TIMES (as
# floor_phases.sh does) reports each host step's mean time at exit, and
# whether a schedule ran as its CUDA graph or command by command (a failed
# capture). Since call b a program frees the losing form once it has chosen
# (one instantiated CUDA graph a step, not two): if auto's host time now
# matches PDL off's, the second graph was the cost. Carry .gpu_carry and
# .gg/gemma-header.bin.
source "$(dirname "$0")/common.sh"
stand_in_model
lib=rlx/lib/librlx_cuda.so
cp "$lib" /tmp/librlx_cuda.normal.so
gcc -O2 -std=gnu11 -fPIC -shared -fvisibility=hidden -DRLX_CUDA_PHASE_TIMES -Icsrc csrc/cuda/shim.c -o "$lib" \
  -ldl -pthread || exit 1
for mode in 0 auto 1; do
  decode_speed "phases-$mode" RLX_CUDA_PDL=$mode
  grep "rlx cuda phase" "$OUT/llm-speed-phases-$mode.log" | tee -a "$S"
done
cp /tmp/librlx_cuda.normal.so "$lib"
decode_speed auto RLX_CUDA_PDL=auto   # the normal shim
decode_speed pdl-off RLX_CUDA_PDL=0
rm -f "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log
echo "=== summary"; cat "$S"
