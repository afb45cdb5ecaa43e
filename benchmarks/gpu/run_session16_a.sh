#!/usr/bin/env bash
# H200, session 16, first call: the elementwise suite (the new fused chains)
# and the FFT suite (fft_shared's radix-16 passes) on cuda, racecheck on
# fft_shared; then where the FFT and log-mel graphs spend their GPU time
# (per thunk, whole replay, CUPTI kernel durations, next to PyTorch's),
# fft_cuda.py's table (as sessions 5-6) and Nsight Compute's view of
# fft_shared at N = 4096 when ncu is on the machine. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "elementwise + signal (cuda, gs 0)" ew.log tests/ops/test_elementwise.py tests/test_signal.py --rlx-device cuda
suite "elementwise (cuda, gs 32)" ew32.log tests/ops/test_elementwise.py --rlx-device cuda --rlx-group-size 32
suite "fft (cuda, gs 0)" fft.log tests/ops/test_fft.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "shared or swizzle" --rlx-device cuda
sanitize memcheck "memcheck chains" memcheck.log tests/ops/test_elementwise.py -k chain --rlx-device cuda
t0=$(date +%s)
timeout 240 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >"$OUT/fft-breakdown.log" 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | tee -a "$S"
t0=$(date +%s)
timeout 200 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" >"$OUT/fft-cuda.log" 2>&1
note "fft_cuda rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-cuda <"$OUT/fft-cuda.log" 2>&1 | tee -a "$S"
if command -v ncu >/dev/null; then
  t0=$(date +%s)
  timeout 200 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats \
    python3 benchmarks/gpu/fft_ncu_target.py >"$OUT/ncu-fft.log" 2>&1
  note "ncu fft_shared rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Executed Ipc|Issue Slots|Block Limit|Shared Memory" "$OUT/ncu-fft.log" | head -40 | tee -a "$S"
else
  note "ncu: not on this machine"
fi
echo "=== summary"; cat "$S"
