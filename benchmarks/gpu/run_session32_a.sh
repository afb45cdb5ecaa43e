#!/usr/bin/env bash
# Device, session 32, call a (issue 19): fft_shared's power-of-two form as
# digit passes in registers (shaders/fft.h, RLX_FFT_DIGIT_PASSES) on cuda
# for the first time: the FFT, window and signal suites at group sizes 0
# and 64, then the kernel against cuFFT's in one process (fft_variants.py,
# CUPTI) and fft_cuda.py's table with the log-mel breakdown.
source "$(dirname "$0")/common.sh"
W="tests/ops/test_fft.py tests/ops/test_fft_window.py"
suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_variants.py >"$OUT/fft-variants-digit.json" 2>"$OUT/fft-variants-digit.log"
note "fft_variants (digit passes) rc=$? in $(( $(date +%s) - t0 )) s"; cat "$OUT/fft-variants-digit.json" | tee -a "$S"
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
