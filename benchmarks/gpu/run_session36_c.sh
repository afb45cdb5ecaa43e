#!/usr/bin/env bash
# Device, session 36, call c (issue 19): fft_mixed now runs every mixed
# length on GPUs (2048 points a half, four groups an SM: call b's best),
# and fft_shared lost its mixed branch. fft_shared_bench.py against fft.h
# from before session 34 (fft_pre34.h) and from this session's start
# (fft_base36.h; both carried untracked), powers of two included; the SASS
# of fft_mixed and Nsight Compute's per-instruction samples for it (call b
# counted ~270 instructions a butterfly); then fft_cuda.py's table, the
# FFT/window/signal suites on cuda, racecheck and memcheck on the mixed
# lengths.
# The earlier fft.h, untracked: git show 1f45f05^:shaders/fft.h > benchmarks/gpu/fft_pre34.h; git show 1ac2fc5:shaders/fft.h > benchmarks/gpu/fft_base36.h.
WARM_CACHE=bg source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
( python3 -c "from rlx.runtime.shader_source import kernel_source; open('/tmp/fft.cu', 'w').write(kernel_source('cuda', '#include \"fft.h\"\n'))"
  nvcc -cubin -O3 -std=c++17 -arch=sm_90 -lineinfo /tmp/fft.cu -o /tmp/fft.cubin >"$OUT/sass-build.log" 2>&1
  cuobjdump -sass /tmp/fft.cubin | awk '/Function : .*fft_mixed/{on=1} /Function : /{if ($0 !~ /fft_mixed/) on=0} on' >"$OUT/fft_mixed.sass"
  echo "sass lines $(wc -l <"$OUT/fft_mixed.sass")" >>"$OUT/sass-build.log" ) &
SASS=$!
FFT_SIZES="200 400 1000 100 2000 256 1024 4096" FFT_SWIZZLE=2 FFT_MIXED_THREADS="128 256" shared_bench mixed "" \
  "old:benchmarks/gpu/fft_pre34.h" "old:benchmarks/gpu/fft_base36.h"
wait $SASS; tail -2 "$OUT/sass-build.log" | tee -a "$S"
FFT_SIZES=200 FFT_SWIZZLE=2 timeout 120 ncu --clock-control none --kernel-name regex:fft_mixed --launch-skip 5 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no --page source --print-source sass \
  --csv python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-lineinfo" >"$OUT/ncu-mixed-source.csv" 2>"$OUT/ncu-mixed-source.err"
note "ncu source rc=$? lines $(wc -l <"$OUT/ncu-mixed-source.csv")"; tail -3 "$OUT/ncu-mixed-source.err"
wait_warm
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
tail -2 "$OUT/fft-cuda.log"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py \
  --rlx-device cuda
MIXED_K="transforms_match_numpy and (N100- or N400- or N1000-) and backward"
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py --rlx-device cuda -k "$MIXED_K"
SAN_TIMEOUT=100 sanitize memcheck "memcheck fft mixed" memcheck-m.log tests/ops/test_fft.py --rlx-device cuda \
  -k "$MIXED_K or half_length"
echo "=== summary"; cat "$S"
