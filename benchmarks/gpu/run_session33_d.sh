#!/usr/bin/env bash
# Device, session 33, call d (issue 19): why the library's register form
# (1024: 36-41 us, 4096: 45-47 us) is slower than the standalone prototype
# of the same shape (30-32, 34 us): the register form as a kernel of its
# own (fft_register_only: its own 80-register budget, no other forms
# beside it) against fft_shared and cuFFT in one process, the prototype's
# kernels of the same grids in another, then Nsight Compute on both
# library kernels at N = 4096.
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH; mkdir -p "$OUT"
FFT_SIZES="256 1024 4096" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 timeout 120 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench.json" "" "-DRLX_FFT_MIN_GROUPS=3" 2>&1 | cut -c1-220
ONLY='n256_t16_b256_16_16$|n1024_t64_b256_16_16_4$|n1024_t64_b128_16_16_4$|n4096_t256_b256_16x3_m3$' \
  timeout 60 python3 benchmarks/gpu/fft_proto.py "$OUT/proto.json" 2>&1 | grep variant
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section Occupancy"
for k in fft_register_only fft_shared; do
  FFT_SIZES=4096 FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 timeout 80 ncu --clock-control none --kernel-name regex:$k --launch-skip 3 --launch-count 1 $SECTIONS \
    python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-DRLX_FFT_MIN_GROUPS=3" >"$OUT/ncu-$k.log" 2>&1; echo "ncu $k rc=$?"
  grep -E "Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Bank|Stall|L1/TEX Hit|Memory Throughput|Compute \(SM\)" "$OUT/ncu-$k.log" | head -30
done
