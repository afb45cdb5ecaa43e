#!/usr/bin/env bash
# H200, session 20, second call: the first call's kernel_resources.py found
# no cubin (it looked in /tmp; the shim's cache is rlx.env.cache_dir()), so
# NVRTC's registers, stack and local memory for fft_shared and the
# vocabulary GEMVs (cuobjdump -res-usage on the cached cubin) beside
# nvcc's, with both compilers' versions; then fft_shared at four and three
# groups an SM (64 and 80 registers: does the NVRTC build's local-memory
# traffic that Nsight Compute counts go away, and is it faster?). Carry
# .gpu_carry.
source "$(dirname "$0")/common.sh"
note "nvcc: $(nvcc --version | tail -1)"
python3 -c "import ctypes, glob, rlx.runtime.shim as s; print('nvrtc dirs', s._cuda_options().get('nvrtc'))" 2>&1 | tee -a "$S"
ls ~/.cache/rlx/cuda-kernels/ 2>&1 | head -3 | tee -a "$S"
HEADERS="fft.h" timeout 120 python3 benchmarks/gpu/kernel_resources.py fft_shared 2>&1 | tee -a "$S"
HEADERS="movement.h quant.h" timeout 300 python3 benchmarks/gpu/kernel_resources.py gemv1i_qI8QFmtQ4_KfE gemv1i_qI8QFmtQ5_0fE gemv1i_qI8QFmtQ6_KfE gemv1i_qI8QFmtQ8_0fE 2>&1 | head -60 | tee -a "$S"
for defines in "" "RLX_FFT_MIN_GROUPS=3"; do
  t0=$(date +%s)
  KERNEL_DEFINES="$defines" timeout 200 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>>"$OUT/fft-variants-err.log"
  note "variant [$defines] rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-600)"
done
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
