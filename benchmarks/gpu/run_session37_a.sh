#!/usr/bin/env bash
# Device, session 37, call a (issue 19): session 36's last changes on a GPU
# at last: windowed_rfft_power (the log-mel power in the FFT's store), the
# frames' pair loads and the review's loader refactor. The build and warm
# cache (common.sh), the FFT, window and signal suites on cuda with
# racecheck and memcheck on the mixed lengths (mixed_checks), memcheck on
# the window and signal suites (the fused power's stores), then
# fft_breakdown.py (the log-mel graph replayed against PyTorch's) and
# fft_cuda.py's table with its replayed log-mel row (fft_benches).
. benchmarks/gpu/common.sh
mixed_checks
SAN_TIMEOUT=100 sanitize memcheck "memcheck window + signal" memcheck-w.log tests/ops/test_fft_window.py \
  tests/test_signal.py --rlx-device cuda
fft_benches
echo "=== summary"; cat "$S"
