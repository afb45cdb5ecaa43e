#!/usr/bin/env bash
# Device, session 36, call h (issue 19): fft_mixed's first pass reads the
# windowed frames of padded signals as 8-byte pairs where a frame lies
# inside its signal (the log-mel graph's FFT took 160 us at 16 clips
# through the general helper, 95 us on a plain source). Cut to the
# session's last ~280 s of device time: the build, the suites on cuda,
# memcheck on the window and signal suites, then fft_breakdown.py (the
# log-mel graph replayed against PyTorch's). The summary goes to $OUT as
# each step ends.
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH
S="$OUT/summary.txt"
note() { echo "$*" | tee -a "$S"; }
timeout 100 python3 setup.py build_ext --inplace -q -j 16 >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
note "build ok"
P="python3 -m pytest -q -p no:cacheprovider"
timeout 120 $P tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py --rlx-device cuda >/tmp/fft.log 2>&1
note "fft + window + signal (cuda) rc=$? $(tail -1 /tmp/fft.log)"; grep -E "^FAILED" /tmp/fft.log | head -5 | tee -a "$S"
timeout 40 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $P tests/ops/test_fft_window.py \
  tests/test_signal.py --rlx-device cuda >/tmp/mc.log 2>&1
note "memcheck window + signal rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc.log | tail -1) $(tail -1 /tmp/mc.log)"
timeout 40 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >/tmp/bd.log 2>&1; note "breakdown rc=$?"
python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | grep -E "^log_mel|rlx_kernels|thunk fft" \
  | cut -c1-300 | tee -a "$S"
