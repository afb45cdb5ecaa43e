#!/usr/bin/env bash
# H200, session 16, second call: the elementwise suite on cuda (ew_chain's
# register slots), the log-mel and FFT breakdown again; fft_shared's register bound and stages a
# pass timed against each other (fft_variants.py, one process a variant,
# KERNEL_DEFINES), the FFT suite on cuda with the new defaults at two group
# sizes and racecheck; then the GEMV sweep with CUPTI kernel durations beside
# the event-timed launches (issue 17). Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "elementwise + signal (cuda, gs 0)" ew.log tests/ops/test_elementwise.py tests/test_signal.py --rlx-device cuda
suite "elementwise (cuda, gs 32)" ew32.log tests/ops/test_elementwise.py --rlx-device cuda --rlx-group-size 32
sanitize memcheck "memcheck chains" memcheck.log tests/ops/test_elementwise.py -k chain --rlx-device cuda
suite "fft (cuda, gs 0)" fft.log tests/ops/test_fft.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "shared or swizzle" --rlx-device cuda
for defines in "" "RLX_FFT_MIN_GROUPS=1" "RLX_FFT_PASS_STAGES=2"; do
  t0=$(date +%s)
  KERNEL_DEFINES="$defines" timeout 150 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>"$OUT/fft-variants-err.log"
  note "variant [$defines] rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-400)"
done
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >"$OUT/fft-breakdown.log" 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | tee -a "$S"
t0=$(date +%s)
timeout 200 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" >"$OUT/fft-cuda.log" 2>&1
note "fft_cuda rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-cuda <"$OUT/fft-cuda.log" 2>&1 | tee -a "$S"
timeout 100 ncu --kernel-name regex:fft_shared --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats python3 benchmarks/gpu/fft_ncu_target.py >"$OUT/ncu-fft.log" 2>&1
note "ncu fft_shared rc=$?"
grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\)|Memory Throughput|Local" "$OUT/ncu-fft.log" | head -12 | tee -a "$S"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 300 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >"$OUT/gemv-trace.log" 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py gemv-trace "$OUT/gemv-trace.json" 2>&1 | tee -a "$S"
echo "=== summary"; cat "$S"
