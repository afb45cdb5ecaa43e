#!/usr/bin/env bash
# Device, session 34, call c (issue 19): run_session34_a.sh cut to what a
# nearly spent budget allows: fft_shared with and without the read-only
# twiddles (RLX_FFT_TWIDDLE_LDG) at both register budgets beside cuFFT,
# powers of two and the mixed-radix form's lengths, then the inverse (the
# conjugate form's first run on a GPU).
# Needs the extension built first (rlx.lowering imports rlx._core):
# python3 setup.py build_ext --inplace -j 16.
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
show() { python3 benchmarks/gpu/summaries.py fft-shared; }
FFT_SIZES="256 1024 2048 4096 200 1000 400" FFT_SWIZZLE=2 timeout 120 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench.json" "" "-DRLX_FFT_TWIDDLE_LDG=1" "-DRLX_FFT_MIN_GROUPS=3" "-DRLX_FFT_MIN_GROUPS=3 -DRLX_FFT_TWIDDLE_LDG=1" 2>&1 | show
FFT_RADIX_ORDER=odd FFT_SIZES="200 1000 400 100" FFT_SWIZZLE=2 timeout 40 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench-odd-first.json" "" 2>&1 | { echo "=== odd radices first"; show; }
FFT_INVERSE=1 FFT_SIZES="256 4096 200" FFT_SWIZZLE=2 timeout 60 python3 benchmarks/gpu/fft_shared_bench.py \
  "$OUT/bench-inverse.json" "" 2>&1 | show
