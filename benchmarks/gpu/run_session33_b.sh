#!/usr/bin/env bash
# Device, session 33, call b (issue 19): compute-sanitizer's racecheck and
# memcheck on fft_shared's register form as the lowering runs it on CUDA
# (the default grid: test_transforms_match_numpy's powers of two, rfft's
# fused half-length store, the window and signal suites' staged loads),
# then fft_variants.py and fft_cuda.py's table.
source "$(dirname "$0")/common.sh"
K="transforms_match_numpy and (N32- or N64- or N128- or N256- or N512- or N1024- or N2048- or N4096-) and backward"
SAN_TIMEOUT=150 sanitize racecheck "racecheck fft register" racecheck.log tests/ops/test_fft.py -k "$K" --rlx-device cuda
SAN_TIMEOUT=150 sanitize memcheck "memcheck fft register" memcheck.log tests/ops/test_fft.py -k "$K or half_length" --rlx-device cuda
SAN_TIMEOUT=150 sanitize racecheck "racecheck window+signal" racecheck-w.log tests/ops/test_fft_window.py tests/test_signal.py --rlx-device cuda
SAN_TIMEOUT=150 sanitize memcheck "memcheck window+signal" memcheck-w.log tests/ops/test_fft_window.py tests/test_signal.py --rlx-device cuda
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_variants.py >"$OUT/fft-variants-register.json" 2>"$OUT/fft-variants-register.log"
note "fft_variants rc=$? in $(( $(date +%s) - t0 )) s"; tee -a "$S" <"$OUT/fft-variants-register.json"
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
