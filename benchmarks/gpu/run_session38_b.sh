#!/usr/bin/env bash
# Device, session 38, call b (issue 19): call a found the register form's
# params by value worth 35.2 -> 32.8 us at N = 1024 (the prototype: 32.0)
# but only 45.0 -> 43.5 at 4096, where the prototype runs 33.9 at 80
# registers and 43.6 at 64. The prototype's SASS issues each pass's
# twiddles (read-only loads) before the barrier that opens the pass; the
# library's plain loads wait behind it. So: read-only twiddles
# (RLX_FFT_TWIDDLE_LDG) with the params by value, by pointer and in
# fft_shared at 3 and 4 groups an SM, all beside cuFFT in one process.
WARM_CACHE=0 . benchmarks/gpu/common.sh
FFT_SIZES="1024 4096 256 2048" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 shared_bench ldg "" \
  "-DRLX_FFT_TWIDDLE_LDG=1" "-DRLX_FFT_TWIDDLE_LDG=1 -DRLX_FFT_MIN_GROUPS=3"
echo "=== summary"; cat "$S"
