#!/usr/bin/env bash
# Device, session 32, call d (issue 19): the code as committed after the
# old bit-reversed form and the digit passes' switches were taken out
# (the same passes as call b): the FFT, window and signal suites on cuda
# at group sizes 0 and 64, fft_variants.py beside cuFFT, racecheck and
# memcheck on the forced GPU form's cases.
source "$(dirname "$0")/common.sh"
W="tests/ops/test_fft.py tests/ops/test_fft_window.py"
suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_variants.py >"$OUT/fft-variants.json" 2>"$OUT/fft-variants.log"
note "fft_variants rc=$? in $(( $(date +%s) - t0 )) s"; cat "$OUT/fft-variants.json" | tee -a "$S"
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft shared" racecheck.log tests/ops/test_fft.py -k "shared_transform" --rlx-device cuda
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft shared" memcheck.log tests/ops/test_fft.py -k "shared_transform or half_length" --rlx-device cuda
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
