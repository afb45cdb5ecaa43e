#!/usr/bin/env bash
# H200, one device call (issue 19): the FFT and signal suites on cuda (at the
# device's group size and at 32), compute-sanitizer memcheck / racecheck /
# synccheck on a subset of the transforms, then benchmarks/gpu/fft_cuda.py
# (rlx against cuFFT through torch.fft, log-mel against PyTorch).
# GROUP_SIZES and TOOLS pick the group sizes and sanitizer tools.
source "$(dirname "$0")/common.sh"
for gs in ${GROUP_SIZES:-0 32}; do
  timeout 240 $P tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda --rlx-group-size $gs >"$OUT/fft-tests-$gs.log" 2>&1
  note "fft+signal tests (cuda, group size $gs) rc=$? $(tail -1 "$OUT/fft-tests-$gs.log")"; grep -E "^FAILED|^E " "$OUT/fft-tests-$gs.log" | head -10
done
SAN_K="transforms_match_numpy and backward and (N7 or N1000 or N4097 or N65536) or rfft_of_even or irfft_follows"
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $P tests/ops/test_fft.py --rlx-device cuda -k "$SAN_K" >"$OUT/fft-$tool.log" 2>&1
  note "fft $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/fft-$tool.log" | tail -1) $(tail -1 "$OUT/fft-$tool.log")"
done
timeout 240 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-bench.json" >"$OUT/fft-bench.log" 2>&1
note "fft bench rc=$?"; tail -14 "$OUT/fft-bench.log"
