#!/usr/bin/env bash
# Device, session 32, call c (issue 19): Nsight Compute on fft_shared's
# digit passes at N = 4096 (fft_shared_bench.py's build) beside the
# standalone Stockham prototype's kernel at the same size
# (fft_proto.cu n4096_t256_b256_16x3_m3), which runs ~30% faster: where
# the difference goes (instructions, group-memory bank conflicts, stalls).
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out}; mkdir -p "$OUT"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy"
FFT_SIZES=4096 FFT_SWIZZLE=1 timeout 200 ncu --clock-control none --kernel-name regex:fft_shared --launch-skip 3 --launch-count 1 $SECTIONS \
  python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "" >"$OUT/ncu-digit.log" 2>&1; echo "ncu digit rc=$?"
ONLY=n4096_t256_b256_16x3_m3 timeout 200 ncu --clock-control none --kernel-name regex:fft_rows --launch-skip 3 --launch-count 1 $SECTIONS \
  python3 benchmarks/gpu/fft_proto.py >"$OUT/ncu-proto.log" 2>&1; echo "ncu proto rc=$?"
for f in digit proto; do echo "== $f"; grep -E "Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Shared.*Bank|bank|Stall|L1/TEX Hit|Memory Throughput|Compute \(SM\)" "$OUT/ncu-$f.log" | head -40; done
