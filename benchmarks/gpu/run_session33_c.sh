#!/usr/bin/env bash
# Device, session 33, call c (issue 19): the register form after the fix
# that reads the scale once (the plain stores had reloaded it from the
# params after every store): fft_shared_bench.py under three register
# budgets (RLX_FFT_MIN_GROUPS 4, 3, 2) at every length 32..4096, layout 2
# (register form) and 1 (digit passes) beside cuFFT; the FFT, window and
# signal suites on cuda (group sizes 0 and 64) with fft_variants.py;
# fft_cuda.py's table with the log-mel breakdown; then racecheck and
# memcheck on the register form's cases (default grid: plain rows, rfft's
# fused store, the window and signal suites' staged loads).
source "$(dirname "$0")/common.sh"
FFT_SIZES="32 64 128 256 512 1024 2048 4096" FFT_SWIZZLE="2 1" \
  shared_bench register "" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_MIN_GROUPS=2"
fft_suites register
fft_benches
fft_sanitizers
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
