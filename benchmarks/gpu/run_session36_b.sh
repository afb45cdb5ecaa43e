#!/usr/bin/env bash
# Device, session 36, call b (issue 19): call a found fft_mixed no faster
# than fft_shared's mixed form at four groups an SM and slower at six or
# eight (it spills), 128 threads a group ahead of 256. The mixed-radix
# passes now read a plain source and write a plain destination an element
# as one 8-byte unit and their twiddles likewise; timed against the same
# kernels before that change (benchmarks/gpu/fft_base36.h, carried
# untracked), at 3/4/5 groups an SM, 2048 points a half, 64/128/256
# threads; Nsight Compute's stall reasons on fft_mixed at N = 200; then
# fft_cuda.py's table, the FFT/window/signal suites on cuda (call a's
# failures: the op did not declare fft_mixed) and racecheck on the mixed
# lengths.
# The earlier fft.h, untracked: git show 1ac2fc5:shaders/fft.h > benchmarks/gpu/fft_base36.h.
WARM_CACHE=bg source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
FFT_SIZES="200 400 1000 100 2000" FFT_SWIZZLE=2 FFT_MIXED_THREADS="64 128 256" shared_bench mixed "" \
  "old:benchmarks/gpu/fft_base36.h -DRLX_FFT_MIXED_MIN_GROUPS=4" "-DRLX_FFT_MIXED_MIN_GROUPS=3" \
  "-DRLX_FFT_MIXED_MIN_GROUPS=5" "-DRLX_FFT_MIXED_MAX=2048u"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section Occupancy --section SourceCounters"
FFT_SIZES=200 FFT_SWIZZLE=2 FFT_MIXED_THREADS=128 timeout 90 ncu --clock-control none --kernel-name regex:fft_mixed \
  --launch-skip 5 --launch-count 1 $SECTIONS python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "" >"$OUT/ncu-mixed.log" 2>&1
note "ncu rc=$?"
grep -E "Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Bank|L1/TEX Hit|Memory Throughput|Compute \(SM\)|Stall|stall" \
  "$OUT/ncu-mixed.log" | head -40 | tee -a "$S"
wait_warm
timeout 120 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>"$OUT/fft-cuda.log" \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
tail -3 "$OUT/fft-cuda.log"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py \
  --rlx-device cuda
SAN_TIMEOUT=100 sanitize racecheck "racecheck fft mixed" racecheck-m.log tests/ops/test_fft.py --rlx-device cuda \
  -k "transforms_match_numpy and (N100- or N400- or N1000-) and backward"
echo "=== summary"; cat "$S"
