#!/usr/bin/env bash
# H200, session 18, fourth call (on about six minutes of device budget):
# the zero-padded frames read in place (FftParams src_pad / src_valid), new
# since call c: the FFT, window and signal suites on cuda (the first compile
# pays the kernel library inside the suite's 90 s) and the log-mel
# breakdown. No sanitizers, no warm-up step. Carry .gpu_carry.
WARM_CACHE=0
source "$(dirname "$0")/common.sh"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py --rlx-device cuda
t0=$(date +%s)
timeout 60 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >/dev/null 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | grep -v "^   thunk" | tee -a "$S"
echo "=== summary"; cat "$S"
