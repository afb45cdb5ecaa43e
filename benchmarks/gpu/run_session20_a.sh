#!/usr/bin/env bash
# H200, next session's first call: session 19's lead on fft_shared (Nsight
# Compute counted 483,328 local-memory spill requests in the group-memory
# form as NVRTC builds it, where nvcc -Xptxas -v reports no stack):
# registers, stack and spills of the NVRTC cubin beside nvcc's for
# fft_shared and the vocabulary GEMV kernels (kernel_resources.py), Nsight
# Compute's source counters on fft_shared at N = 256, then the GEMV table
# (issue 17: the vocabulary shape at 0.49-0.61 of copy bandwidth for
# q4_k / q5_0 / q6_k). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
HEADERS="fft.h" timeout 120 python3 benchmarks/gpu/kernel_resources.py fft_shared 2>&1 | tee -a "$S"
HEADERS="movement.h quant.h" timeout 300 python3 benchmarks/gpu/kernel_resources.py QFmtQ4_KfE QFmtQ5_0fE QFmtQ6_KfE QFmtQ8_0fE 2>&1 | grep -B1 -A1 gemv | head -60 | tee -a "$S"
timeout 150 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 benchmarks/gpu/fft_ncu_target.py 256 >"$OUT/ncu-fft.log" 2>&1
note "ncu fft_shared rc=$?"
grep -E "Duration|Local|Spill|Stall|Warp Cycles Per Issued|No Eligible|Branch" "$OUT/ncu-fft.log" | head -20 | tee -a "$S"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 240 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv.json" >"$OUT/gemv.log" 2>&1
note "gemv rc=$? in $(( $(date +%s) - t0 )) s"
gemv_table "$OUT/gemv.json"
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
