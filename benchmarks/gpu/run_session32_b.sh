#!/usr/bin/env bash
# Device, session 32, call b (issue 19): compute-sanitizer on the digit
# passes (memcheck and racecheck over the forced GPU form's cases and the
# windowed / padded frames), then the same-machine A/B against the form
# before them (KERNEL_DEFINES=RLX_FFT_DIGIT_PASSES=0, its own NVRTC build).
WARM_CACHE=0 source "$(dirname "$0")/common.sh"
SAN_TIMEOUT=120 sanitize memcheck "memcheck fft shared" memcheck.log tests/ops/test_fft.py -k "shared_transform or half_length" --rlx-device cuda
SAN_TIMEOUT=120 sanitize racecheck "racecheck fft shared" racecheck.log tests/ops/test_fft.py -k "shared_transform" --rlx-device cuda
SAN_TIMEOUT=100 sanitize racecheck "racecheck window" racecheck-w.log tests/ops/test_fft_window.py -k "padded or window" --rlx-device cuda
t0=$(date +%s)
KERNEL_DEFINES="RLX_FFT_DIGIT_PASSES=0" timeout 200 python3 benchmarks/gpu/fft_variants.py \
  >"$OUT/fft-variants-before.json" 2>"$OUT/fft-variants-before.log"
note "fft_variants (before: RLX_FFT_DIGIT_PASSES=0) rc=$? in $(( $(date +%s) - t0 )) s"; cat "$OUT/fft-variants-before.json" | tee -a "$S"
rm -f "$OUT"/build.log "$OUT"/pip.log
echo "=== summary"; cat "$S"
