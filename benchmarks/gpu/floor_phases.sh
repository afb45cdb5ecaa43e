#!/usr/bin/env bash
# H200: the replay floor's run split into the shim's steps. Builds a copy of
# the CUDA shim with -DRLX_CUDA_PHASE_TIMES over rlx/lib's, runs
# floor_phases.py, then puts the normal build back.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD
lib=rlx/lib/librlx_cuda.so
cp "$lib" /tmp/librlx_cuda.normal.so
gcc -O2 -std=gnu11 -fPIC -shared -fvisibility=hidden -DRLX_CUDA_PHASE_TIMES -Icsrc csrc/cuda/shim.c -o "$lib" \
  -ldl -pthread || exit 1
timeout 120 python3 benchmarks/gpu/floor_phases.py
cp /tmp/librlx_cuda.normal.so "$lib"
