#!/usr/bin/env bash
# Ran at 11e337f (the register form was removed after call c: slower).
# H200, session 19, second call: fft_shared's register Stockham passes
# (shaders/fft.h: powers of two and mixed radix, the first pass reading the
# source and the last writing the destination) checked on cuda (the FFT,
# window and signal suites at the device's group size, at 64 and 32
# threads, where groups too small for the registers take the forms in group
# memory; memcheck and racecheck on the rows-per-group cases), then timed:
# fft_variants.py per KERNEL_DEFINES variant (registers bound, largest
# radix, the form in group memory) and the log-mel / FFT breakdown and
# fft_cuda.py's table with the defaults. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
W="tests/ops/test_fft.py tests/ops/test_fft_window.py"
suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
suite "fft (cuda, gs 32)" fft32.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck rows per group" memcheck.log tests/ops/test_fft.py -k "rows_per_group or half_length" --rlx-device cuda
sanitize racecheck "racecheck rows per group" racecheck.log tests/ops/test_fft.py -k "rows_per_group" --rlx-device cuda
for defines in "" "RLX_FFT_MIN_GROUPS=3" "RLX_FFT_MIN_GROUPS=2" "RLX_FFT_RADIX_BITS=3u RLX_FFT_MIN_GROUPS=2" "RLX_FFT_REGISTER_PASSES=0"; do
  t0=$(date +%s)
  KERNEL_DEFINES="$defines" timeout 150 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>>"$OUT/fft-variants-err.log"
  note "variant [$defines] rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-400)"
done
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log "$OUT"/fft32.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
