#!/usr/bin/env bash
# Device, session 36, call d (issue 19): call c's SASS of fft_mixed had
# every element's load in its own branchy block (group memory, a plain
# source or the general helper, chosen at run time), so its loads issued
# one at a time: 911 LDG and 2034 IMAD against 471 FP32 instructions. Each
# pass is now straight-line code for where it reads and writes (a
# template on both), and rfft's unpacking store keeps its params in
# registers and writes 8-byte bins. fft_shared_bench.py against call c's
# fft.h (fft_base36b.h, carried untracked), the new SASS and Nsight
# Compute's per-instruction samples, fft_cuda.py's table, the suites on
# cuda, racecheck and memcheck. Logs stay in /tmp; $OUT gets five files.
# The earlier fft.h, untracked: git show 1b41c44:shaders/fft.h > benchmarks/gpu/fft_base36b.h.
FINAL=${OUT:-/tmp/rlx-out}
export OUT=/tmp/rlx-work
WARM_CACHE=bg source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
( python3 -c "from rlx.runtime.shader_source import kernel_source; open('/tmp/fft.cu', 'w').write(kernel_source('cuda', '#include \"fft.h\"\n'))"
  nvcc -cubin -O3 -std=c++17 -arch=sm_90 -lineinfo /tmp/fft.cu -o /tmp/fft.cubin >"$OUT/sass-build.log" 2>&1
  cuobjdump -sass /tmp/fft.cubin | awk '/Function : .*fft_mixed/{on=1} /Function : /{if ($0 !~ /fft_mixed/) on=0} on' >"$FINAL/fft_mixed.sass" ) &
SASS=$!
FFT_SIZES="200 400 1000 100 2000" FFT_SWIZZLE=2 FFT_MIXED_THREADS="128 256" shared_bench mixed "" \
  "old:benchmarks/gpu/fft_base36b.h"
cp "$OUT/fft-shared-mixed.log" "$FINAL/"
wait $SASS; note "sass lines $(wc -l <"$FINAL/fft_mixed.sass")"
FFT_SIZES=200 FFT_SWIZZLE=2 timeout 120 ncu --clock-control none --kernel-name regex:fft_mixed --launch-skip 5 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no --page source --print-source sass \
  --csv python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-lineinfo" >"$FINAL/ncu-mixed-source.csv" 2>"$OUT/ncu.err"
note "ncu source rc=$? lines $(wc -l <"$FINAL/ncu-mixed-source.csv")"; tail -3 "$OUT/ncu.err" | tee -a "$S"
wait_warm
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$FINAL/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
tail -2 "$OUT/fft-cuda.log" | tee -a "$S"
mixed_checks
SAN_TIMEOUT=100 sanitize memcheck "memcheck window + signal" memcheck-w.log tests/ops/test_fft_window.py \
  tests/test_signal.py --rlx-device cuda
cp "$S" "$FINAL/summary.txt"
echo "=== summary"; cat "$S"
