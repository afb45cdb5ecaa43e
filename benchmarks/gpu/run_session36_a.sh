#!/usr/bin/env bash
# Device, session 36, call a (issue 19): fft_mixed, the mixed-radix form in
# a kernel of its own (shaders/fft.h: group memory for its two halves
# alone, a register budget for more groups an SM; the form lost 20% at
# three groups an SM against four in session 35). fft_shared_bench.py
# times it beside fft_shared's mixed form at the mixed lengths, at 6 (the
# default), 8 and 4 groups an SM, 512/1024/2048 points a half, 256 and 128
# threads a group, and fft.h from before session 34's rework of the form
# (benchmarks/gpu/fft_pre34.h, carried untracked: the rfft 400 question);
# then fft_cuda.py's table through rlx, the FFT/window/signal suites on
# cuda, and racecheck on the mixed lengths. The build and the NVRTC cache
# warm-up run first (the warm-up beside the nvcc builds of the bench).
# The earlier fft.h, untracked: git show 1f45f05^:shaders/fft.h > benchmarks/gpu/fft_pre34.h.
WARM_CACHE=bg source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
FFT_SIZES="200 400 1000 100 2000" FFT_SWIZZLE=2 FFT_MIXED_THREADS="256 128" shared_bench mixed "" \
  "-DRLX_FFT_MIXED_MIN_GROUPS=8" "-DRLX_FFT_MIXED_MIN_GROUPS=4" "-DRLX_FFT_MIXED_MAX=2048u" \
  "-DRLX_FFT_MIXED_MAX=512u -DRLX_FFT_MIXED_MIN_GROUPS=8" "old:benchmarks/gpu/fft_pre34.h"
wait_warm
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py \
  --rlx-device cuda
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py --rlx-device cuda \
  -k "transforms_match_numpy and (N100- or N400- or N1000-) and backward"
echo "=== summary"; cat "$S"
