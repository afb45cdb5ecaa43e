#!/usr/bin/env bash
# Device, session 36, call f (issue 19): fft_mixed with radix-8 passes
# (the power of two of N in ceil(a / 3) passes of 8 and 4: 200 = 8 x 5 x 5,
# 1000 = 8 x 5 x 5 x 5, a pass fewer each; the span 4 bits a pass).
# fft_shared_bench.py against call d's fft.h (fft_base36c.h, carried
# untracked), fft_cuda.py's table, the suites on cuda, racecheck and
# memcheck. Logs stay in /tmp; $OUT gets three files.
FINAL=${OUT:-/tmp/rlx-out}
export OUT=/tmp/rlx-work
WARM_CACHE=0 source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
( t0=$(date +%s)
  python3 -c "import numpy as np, rlx; g = rlx.Graph(); x = g.input('x', (2, 3)); g.set_outputs(y=g.relu(x)); rlx.compile(g, device='cuda').run(x=np.ones((2, 3), np.float32))" \
    >"$OUT/warm.log" 2>&1; echo "kernel cache warm rc=$? in $(( $(date +%s) - t0 )) s" >>"$OUT/warm.log" ) &
WARM=$!
FFT_SIZES="200 400 1000 100 2000 1536" FFT_SWIZZLE=2 shared_bench mixed "" "old:benchmarks/gpu/fft_base36c.h"
cp "$OUT/fft-shared-mixed.log" "$FINAL/"
FFT_INVERSE=1 FFT_SIZES="200 1000" FFT_SWIZZLE=2 shared_bench inverse ""
wait $WARM; tail -1 "$OUT/warm.log" | tee -a "$S"
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$FINAL/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
tail -2 "$OUT/fft-cuda.log" | tee -a "$S"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py \
  --rlx-device cuda
MIXED_K="transforms_match_numpy and (N100- or N400- or N1000-) and backward"
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py --rlx-device cuda -k "$MIXED_K"
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft mixed + half lengths" memcheck-m.log tests/ops/test_fft.py \
  --rlx-device cuda -k "$MIXED_K or half_length"
cp "$S" "$FINAL/summary.txt"
echo "=== summary"; cat "$S"
