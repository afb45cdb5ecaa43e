#!/usr/bin/env bash
# Device, session 38, call e (issue 19): call d's stall samples put the
# register form's extra time in three places against the prototype: its
# fifteen twiddle addresses a butterfly chained (each the last plus k's
# stride, the register rewritten once the previous load had read it: ~500
# long-scoreboard samples on four IMAD.WIDE), instruction-fetch stalls (617
# samples against 21) and the params' reads. The twiddles now come from a
# run of R pairs a butterfly (rlx/lowering/fft.py register_twiddles: one
# base, constant offsets). fft_shared_bench.py: fft_shared, the register
# form alone, by value, and one length a kernel (by pointer and by value),
# with and without read-only twiddles, fft_shared at 3 groups an SM too; then the FFT, window and signal suites on cuda and
# racecheck / memcheck on the register-form lengths (fft_sanitizers' first
# two).
WARM_CACHE=bg . benchmarks/gpu/common.sh
FFT_SIZES="1024 4096 256 2048" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 FFT_REGISTER_FIXED=1 \
  shared_bench runs "" "-DRLX_FFT_TWIDDLE_LDG=1" "-DRLX_FFT_MIN_GROUPS=3"
wait_warm
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py \
  tests/test_signal.py --rlx-device cuda
fft_register_sanitizers
echo "=== summary"; cat "$S"
