#!/usr/bin/env bash
# Device, session 34, call a (issue 19): session 33's call d, refined by
# the static SASS (nvcc 13.0, benchmarks/README "H100, session 34"): the
# prototype hoists a pass's twiddle loads above the barrier before it
# (__ldg, read-only path), the library's plain loads wait behind it, so
# RLX_FFT_TWIDDLE_LDG=1 is timed at both register budgets beside the
# default, the run-time-sign inverse, the register form as a kernel of its
# own and the prototype; the inverse direction too; then Nsight Compute on
# fft_shared at N = 4096 with the read-only twiddles. Needs the extension
# built first (rlx.lowering imports rlx._core).
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
show() { python3 benchmarks/gpu/summaries.py fft-shared; }
FFT_SIZES="64 256 512 1024 2048 4096 200 1000 400 100" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 timeout 150 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench.json" "" "-DRLX_FFT_TWIDDLE_LDG=1" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_MIN_GROUPS=3 -DRLX_FFT_TWIDDLE_LDG=1" \
  "-DRLX_FFT_REGISTER_CONJ=0" 2>&1 | show
FFT_RADIX_ORDER=odd FFT_SIZES="200 1000 400 100" FFT_SWIZZLE=2 timeout 40 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench-odd-first.json" "" 2>&1 | { echo "=== odd radices first"; show; }
FFT_INVERSE=1 FFT_SIZES="256 1024 4096 200" FFT_SWIZZLE=2 timeout 80 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench-inverse.json" "" "-DRLX_FFT_TWIDDLE_LDG=1" "-DRLX_FFT_REGISTER_CONJ=0" 2>&1 | show
ONLY='n64_t8|n256_t16_b256_16_16$|n512_t32|n1024_t64_b256_16_16_4$|n1024_t64_b256_16_16_4_m3$|n2048_t128|n4096_t256_b256_16x3$|n4096_t256_b256_16x3_m3$' \
  timeout 70 python3 benchmarks/gpu/fft_proto.py "$OUT/proto.json" 2>&1 | grep variant
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section Occupancy"
for v in "-DRLX_FFT_TWIDDLE_LDG=1"; do
  tag=${v:+ldg}; tag=${tag:-default}
  FFT_SIZES=4096 FFT_SWIZZLE=2 timeout 70 ncu --clock-control none --kernel-name regex:fft_shared --launch-skip 3 --launch-count 1 $SECTIONS \
    python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "$v" >"$OUT/ncu-$tag.log" 2>&1; echo "ncu $tag rc=$?"
  grep -E "Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Bank|L1/TEX Hit|Memory Throughput|Compute \(SM\)" "$OUT/ncu-$tag.log" | head -20
done
