#!/usr/bin/env bash
# Device, session 38, call g (issue 19): call e's layout (a butterfly's
# twiddles one run, k R + r) made every kernel slower (4096: 44.6 -> 56
# us): a SIMD group's lanes read pairs 128 bytes apart, sixteen or more
# sectors a load. Now r S + k: a butterfly's loads still one base plus
# constant offsets, a SIMD group's adjacent. fft_shared_bench.py with this
# fft.h beside the one before session 38 (old:) and with read-only
# twiddles, no compile beside it; then the kernel cache, the FFT, window
# and signal suites on cuda, racecheck and memcheck on the register-form
# lengths.
WARM_CACHE=0 . benchmarks/gpu/common.sh
FFT_SIZES="1024 4096 256 2048" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 FFT_REGISTER_FIXED=1 \
  shared_bench rmajor "" "old:benchmarks/gpu/fft_h_before_s38.h" "-DRLX_FFT_TWIDDLE_LDG=1"
warm_kernel_cache; tail -1 "$OUT/warm.log" | tee -a "$S"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py \
  tests/test_signal.py --rlx-device cuda
fft_register_sanitizers
echo "=== summary"; cat "$S"
