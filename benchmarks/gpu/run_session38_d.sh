#!/usr/bin/env bash
# Device, session 38, call d (issue 19): call c found the same occupancy
# (3 groups an SM, 80 registers), fewer instructions in the library's
# register form (7.54 M against 8.01 M) but 28.4 cycles between issues
# against the prototype's 21.1 at N = 4096. Per-instruction stall samples
# (SASS, Nsight Compute's source page) of both kernels, to find where.
WARM_CACHE=0 . benchmarks/gpu/common.sh
FFT_SIZES=4096 FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 timeout 150 ncu --clock-control none \
  --kernel-name regex:fft_register_value --launch-skip 3 --launch-count 1 --section SourceCounters \
  --section WarpStateStats --import-source no --page source --print-source sass --csv \
  python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-DRLX_FFT_TWIDDLE_LDG=1" >"$OUT/src-lib.csv" 2>"$OUT/ncu-lib.err"
note "ncu library source rc=$? lines $(wc -l <"$OUT/src-lib.csv")"
ONLY='n4096_t256_b256_16x3_m3$' timeout 100 ncu --clock-control none --kernel-name regex:fft_rows --launch-skip 3 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --import-source no --page source \
  --print-source sass --csv python3 benchmarks/gpu/fft_proto.py /tmp/p.json >"$OUT/src-proto.csv" 2>"$OUT/ncu-proto.err"
note "ncu prototype source rc=$? lines $(wc -l <"$OUT/src-proto.csv")"
FFT_SIZES=4096 FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 FFT_PARAMS_BY_VALUE=1 timeout 150 ncu --clock-control none \
  --kernel-name regex:fft_register_value --launch-skip 3 --launch-count 1 --section WarpStateStats --print-details all \
  python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-DRLX_FFT_TWIDDLE_LDG=1" >"$OUT/stall-lib.log" 2>&1
ONLY='n4096_t256_b256_16x3_m3$' timeout 100 ncu --clock-control none --kernel-name regex:fft_rows --launch-skip 3 \
  --launch-count 1 --section WarpStateStats --print-details all python3 benchmarks/gpu/fft_proto.py /tmp/p.json \
  >"$OUT/stall-proto.log" 2>&1
tar czf "$OUT/ncu-src.tgz" -C "$OUT" src-lib.csv src-proto.csv stall-lib.log stall-proto.log && rm "$OUT"/src-*.csv
echo "=== summary"; cat "$S"
