#!/usr/bin/env bash
# Device, session 34, call b (issue 19): the committed FFT through rlx on
# cuda: the mixed-radix form's new passes (a compile-time radix a pass, no
# division an element, the first pass reading the source and the last
# writing the destination) and the register form's conjugate inverse
# (session 33, never run on a GPU): the FFT, window and signal suites at
# group sizes 0 and 64 with fft_variants.py, fft_cuda.py's table with the
# log-mel breakdown, racecheck and memcheck on the register form's cases
# and on the mixed-radix lengths.
source "$(dirname "$0")/common.sh"
fft_suites session34
fft_benches
fft_sanitizers
k="transforms_match_numpy and (N3- or N5- or N100- or N400- or N1000-) and backward"
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py -k "$k" --rlx-device cuda
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft mixed" memcheck-m.log tests/ops/test_fft.py -k "$k or half_length" \
  --rlx-device cuda
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
