#!/usr/bin/env bash
# Device, session 33, call d (issue 19): why the library's register form
# (1024: 36-41 us, 4096: 45-47 us) is slower than the standalone prototype
# of the same shape (30-32, 34 us): the register form as a kernel of its
# own (fft_register_only: its own 80-register budget, no other forms
# beside it) against fft_shared and cuFFT in one process, the prototype's
# kernels of the same grids in another, then Nsight Compute on both
# library kernels at N = 4096. The bench's variants: the inverse as the
# forward transform of the conjugate (RLX_FFT_REGISTER_CONJ, new) or not,
# three or four groups an SM, twiddles through the read-only path.
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH; mkdir -p "$OUT"
FFT_SIZES="64 256 512 1024 2048 4096" FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 timeout 150 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench.json" "" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_REGISTER_CONJ=0" "-DRLX_FFT_REGISTER_CONJ=0 -DRLX_FFT_MIN_GROUPS=3" \
  "-DRLX_FFT_MIN_GROUPS=3 -DRLX_FFT_TWIDDLE_LDG=1" 2>&1 | python3 -c "
import json, sys
for line in sys.stdin:
    try: r = json.loads(line)
    except ValueError: print(line.rstrip()[:200]); continue
    print(r['defines'] or 'default', r['kernel'], r['n'], r['us'], 'cufft', r['cufft_us'], 'ratio', r['ratio'], '%.1e' % r['rel_err'], r['usage'][:40])"
ONLY='n256_t16_b256_16_16$|n1024_t64_b256_16_16_4$|n1024_t64_b128_16_16_4$|n4096_t256_b256_16x3_m3$' \
  timeout 60 python3 benchmarks/gpu/fft_proto.py "$OUT/proto.json" 2>&1 | grep variant
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section Occupancy"
for k in fft_register_only fft_shared; do
  FFT_SIZES=4096 FFT_SWIZZLE=2 FFT_REGISTER_ONLY=1 timeout 80 ncu --clock-control none --kernel-name regex:$k --launch-skip 3 --launch-count 1 $SECTIONS \
    python3 benchmarks/gpu/fft_shared_bench.py /tmp/x.json "-DRLX_FFT_MIN_GROUPS=3" >"$OUT/ncu-$k.log" 2>&1; echo "ncu $k rc=$?"
  grep -E "Duration|Executed Instructions |Issued Ipc|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Bank|Stall|L1/TEX Hit|Memory Throughput|Compute \(SM\)" "$OUT/ncu-$k.log" | head -30
done
