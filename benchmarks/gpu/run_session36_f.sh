#!/usr/bin/env bash
# Device, session 36, call f (issue 19): fft_mixed with radix-8 passes
# (the power of two of N in ceil(a / 3) passes of 8 and 4: 200 = 8 x 5 x 5,
# 1000 = 8 x 5 x 5 x 5, a pass fewer each; the span 4 bits a pass).
# fft_shared_bench.py against call d's fft.h (fft_base36c.h, carried
# untracked), fft_cuda.py's table, the suites on cuda, racecheck and
# memcheck. Logs stay in /tmp; $OUT gets three files.
# The earlier fft.h, untracked: git show 5de9c9b:shaders/fft.h > benchmarks/gpu/fft_base36c.h (that A/B crashed: the header decodes 3-bit spans, the bench packs 4).
FINAL=${OUT:-/tmp/rlx-out}
export OUT=/tmp/rlx-work
WARM_CACHE=bg source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
FFT_SIZES="200 400 1000 100 2000 1536" FFT_SWIZZLE=2 shared_bench mixed "" "old:benchmarks/gpu/fft_base36c.h"
cp "$OUT/fft-shared-mixed.log" "$FINAL/"
FFT_INVERSE=1 FFT_SIZES="200 1000" FFT_SWIZZLE=2 shared_bench inverse ""
wait_warm
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$FINAL/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
tail -2 "$OUT/fft-cuda.log" | tee -a "$S"
mixed_checks
cp "$S" "$FINAL/summary.txt"
echo "=== summary"; cat "$S"
