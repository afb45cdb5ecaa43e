#!/usr/bin/env bash
# Device, session 32, call d (issue 19): the code as committed after the
# old bit-reversed form and the digit passes' switches were taken out
# (the same passes as call b): the FFT, window and signal suites on cuda
# at group sizes 0 and 64, fft_variants.py beside cuFFT, racecheck and
# memcheck on the forced GPU form's cases.
source "$(dirname "$0")/common.sh"
fft_suites committed
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft shared" racecheck.log tests/ops/test_fft.py -k "shared_transform" --rlx-device cuda
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft shared" memcheck.log tests/ops/test_fft.py -k "shared_transform or half_length" --rlx-device cuda
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
