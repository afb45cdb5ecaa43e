#!/usr/bin/env bash
# Device, session 32, call a (issue 19): fft_shared's power-of-two form as
# digit passes in registers (shaders/fft.h, RLX_FFT_DIGIT_PASSES) on cuda
# for the first time: the FFT, window and signal suites at group sizes 0
# and 64, then the kernel against cuFFT's in one process (fft_variants.py,
# CUPTI) and fft_cuda.py's table with the log-mel breakdown.
source "$(dirname "$0")/common.sh"
fft_suites digit
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
