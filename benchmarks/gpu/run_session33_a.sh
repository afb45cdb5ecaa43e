#!/usr/bin/env bash
# Device, session 33, call a (issue 19): fft_shared's register form
# (shaders/fft.h: Stockham passes with a row's elements in its threads'
# registers, padded slots on CUDA) on a GPU for the first time:
# fft_shared_bench.py beside cuFFT at every length 32..4096 under three
# register budgets (RLX_FFT_MIN_GROUPS 4, 3, 2), layout 2 (the register
# form) and 1 (the digit passes) in the same process; then the FFT,
# window and signal suites on cuda at group sizes 0 and 64 with
# fft_variants.py, and fft_cuda.py's table with the log-mel breakdown.
source "$(dirname "$0")/common.sh"
FFT_SIZES="32 64 128 256 512 1024 2048 4096" FFT_SWIZZLE="2 1" \
  shared_bench register "" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_MIN_GROUPS=2"
fft_suites register
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
