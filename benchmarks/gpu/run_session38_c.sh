#!/usr/bin/env bash
# Device, session 38, call c (issue 19): calls a and b left the library's
# register form at 43 us at N = 4096 (params by value, read-only twiddles,
# 3 groups an SM) where the prototype of the same algorithm runs 33.9 at 3
# groups an SM (80 registers) and 43.6 at 4 (64). Nsight Compute on both
# kernels at 4096, one launch each, the same sections: where the 10 us go.
WARM_CACHE=0 . benchmarks/gpu/common.sh
SECTIONS="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section InstructionStats"
KEYS="Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Bank|L1/TEX Hit|L2 Hit|Memory Throughput|DRAM Throughput|Compute \(SM\)|Waves Per SM|Stall|Shared Memory Configuration|Driver Shared"
FFT_SIZES=4096 FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 timeout 150 ncu --clock-control none \
  --kernel-name regex:fft_register_value --launch-skip 3 --launch-count 1 $SECTIONS \
  python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-DRLX_FFT_TWIDDLE_LDG=1" >"$OUT/ncu-lib.log" 2>&1
note "ncu library rc=$?"; grep -E "$KEYS" "$OUT/ncu-lib.log" | tee -a "$S"
ONLY='n4096_t256_b256_16x3_m3$' timeout 100 ncu --clock-control none --kernel-name regex:fft_rows --launch-skip 3 \
  --launch-count 1 $SECTIONS python3 benchmarks/gpu/fft_proto.py /tmp/p.json >"$OUT/ncu-proto.log" 2>&1
note "ncu prototype rc=$?"; grep -E "$KEYS" "$OUT/ncu-proto.log" | tee -a "$S"
echo "=== summary"; cat "$S"
