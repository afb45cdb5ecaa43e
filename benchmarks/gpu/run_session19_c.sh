#!/usr/bin/env bash
# Ran at 0e05cf0 (its RLX_FFT_THREADS / RLX_FFT_REGS switches went with the
# register form, removed after this call: slower).
# H200, session 19, third call: why call b's register Stockham form of
# fft_shared was slower than the form in group memory (N = 256: 56.8 us
# against session 16's 46.0). Nsight Compute on both forms at N = 256
# (speed of light, warp stalls, memory, occupancy), then fft_variants.py
# with 512 threads a group holding 8 points each (radix 8: no radix-16
# registers). Each variant compiles the kernel library once (~100 s).
# Carry .gpu_carry.
export WARM_CACHE=0
source "$(dirname "$0")/common.sh"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats"
for v in "registers:" "group-memory:RLX_FFT_REGISTER_PASSES=0"; do
  name=${v%%:*}; defines=${v#*:}; t0=$(date +%s)
  KERNEL_DEFINES="$defines" timeout 170 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 $SECTIONS \
    python3 benchmarks/gpu/fft_ncu_target.py 256 >"$OUT/ncu-$name.log" 2>&1
  note "ncu $name [$defines] rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\) Thr|Memory Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|Local|L1/TEX Hit|Stall" "$OUT/ncu-$name.log" | head -16 | tee -a "$S"
done
t0=$(date +%s)
FFT_SHARED_THREADS=512 KERNEL_DEFINES="RLX_FFT_THREADS=512 RLX_FFT_MIN_GROUPS=2 RLX_FFT_REGS=8u RLX_FFT_RADIX_BITS=3u RLX_FFT_PASS_STAGES=3u" \
  timeout 170 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>>"$OUT/fft-variants-err.log"
note "variant 512 x 8 rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-600)"
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
