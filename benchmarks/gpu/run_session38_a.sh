#!/usr/bin/env bash
# Device, session 38, call a (issue 19): why the library's register form
# runs 1.35-1.53x cuFFT at N = 1024 / 4096 where the standalone prototype
# of the same algorithm (fft_proto.cu) ran ~1.25x. The hypothesis: the
# library reads FftParams through a pointer into global memory, a load
# ahead of the row's first source load (its address needs the params) and
# another ahead of the stores; the prototype's addresses come from
# blockIdx alone. fft_shared_bench.py times fft_shared, the register form
# as a kernel of its own, and that kernel with its params by value (a
# __grid_constant__ parameter: constant-bank reads), then fft_proto.py the
# prototype at 3 and 4 groups an SM, all beside cuFFT on one machine.
WARM_CACHE=0 . benchmarks/gpu/common.sh
FFT_SIZES="1024 4096 256" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 shared_bench byvalue ""
t0=$(date +%s)
ONLY="n4096_t256_b256_16x3|n1024_t64_b256_16_16_4|n256_t16_b256_16_16" timeout 150 python3 benchmarks/gpu/fft_proto.py \
  "$OUT/fft-proto.json" >"$OUT/fft-proto.log" 2>&1
note "fft_proto rc=$? in $(( $(date +%s) - t0 )) s"; grep -v "^ptxas" "$OUT/fft-proto.log" | tail -20 | cut -c1-200 | tee -a "$S"
FFT_SIZES="1024 4096" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 shared_bench byvalue-again ""
echo "=== summary"; cat "$S"
