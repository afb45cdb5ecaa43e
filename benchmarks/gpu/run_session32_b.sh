#!/usr/bin/env bash
# Device, session 32, call b (issue 19): fft_shared's digit passes as kept
# after fft_shared_bench.py's variants (pairs in group memory, twiddles as
# pairs, no per-lane twiddle branch): the FFT, window and signal suites on
# cuda at group sizes 0 and 64, the kernel beside cuFFT's through rlx
# (fft_variants.py, CUPTI), fft_cuda.py's table and the log-mel breakdown,
# then compute-sanitizer memcheck and racecheck on the forced GPU form's
# cases and the windowed / padded frames.
source "$(dirname "$0")/common.sh"
fft_suites kept
fft_benches
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft shared" memcheck.log tests/ops/test_fft.py -k "shared_transform or half_length" --rlx-device cuda
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft shared" racecheck.log tests/ops/test_fft.py -k "shared_transform" --rlx-device cuda
SAN_TIMEOUT=80 sanitize racecheck "racecheck window" racecheck-w.log tests/ops/test_fft_window.py -k "padded or window" --rlx-device cuda
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
