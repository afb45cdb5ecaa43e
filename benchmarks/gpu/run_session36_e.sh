#!/usr/bin/env bash
# Device, session 36, call e (issue 19): the powers of two (1024 at 1.38x,
# 4096 at 1.52x cuFFT through rlx). fft_shared_bench.py with the register
# form also as a kernel of its own, at 4 and 3 groups an SM; the Stockham
# prototype at 1024 and 4096 beside it; the SASS of fft_shared and Nsight
# Compute's per-instruction samples at N = 4096 (call d's method, which
# found fft_mixed's branchy loads). Logs stay in /tmp; $OUT gets four files.
FINAL=${OUT:-/tmp/rlx-out}
export OUT=/tmp/rlx-work
WARM_CACHE=0 source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$S"
( python3 -c "from rlx.runtime.shader_source import kernel_source; open('/tmp/fft.cu', 'w').write(kernel_source('cuda', '#include \"fft.h\"\n'))"
  nvcc -cubin -O3 -std=c++17 -arch=sm_90 -lineinfo /tmp/fft.cu -o /tmp/fft.cubin >"$OUT/sass-build.log" 2>&1
  cuobjdump -sass /tmp/fft.cubin | awk '/Function : .*fft_shared/{on=1} /Function : /{if ($0 !~ /fft_shared/) on=0} on' >"$FINAL/fft_shared.sass" ) &
SASS=$!
FFT_SIZES="256 1024 4096" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 shared_bench pow2 "" "-DRLX_FFT_MIN_GROUPS=3"
cp "$OUT/fft-shared-pow2.log" "$FINAL/"
ONLY='n1024_t64_b256_16_16_4$|n4096_t256_b256_16x3$|n256_t16_b256_16_16$' timeout 90 python3 benchmarks/gpu/fft_proto.py \
  /tmp/proto.json 2>&1 | grep variant | tee -a "$S"
wait $SASS; note "sass lines $(wc -l <"$FINAL/fft_shared.sass")"
FFT_SIZES=4096 FFT_SWIZZLE=2 timeout 120 ncu --clock-control none --kernel-name regex:fft_shared --launch-skip 5 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no --page source --print-source sass \
  --csv python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-lineinfo" >"$FINAL/ncu-4096-source.csv" 2>"$OUT/ncu.err"
note "ncu source rc=$? lines $(wc -l <"$FINAL/ncu-4096-source.csv")"; tail -3 "$OUT/ncu.err" | tee -a "$S"
echo "=== summary"; cat "$S"
