#!/usr/bin/env bash
# H200, session 16, third call: the FFT suites and racecheck after rfft's
# unpacking moved into fft_shared's store on GPUs, the log-mel breakdown and
# fft_cuda.py's table again; then the GEMV sweep with CUPTI kernel durations
# beside the event-timed launches (issue 17; call b's attempt failed
# unseen), few files so that its log comes back. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "fft + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "swizzle or rfft" --rlx-device cuda
t0=$(date +%s)
timeout 120 python3 benchmarks/gpu/fft_breakdown.py "$OUT/fft-breakdown.json" >/dev/null 2>&1
note "fft_breakdown rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py fft-breakdown "$OUT/fft-breakdown.json" 2>&1 | tee -a "$S"
timeout 100 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda.json" 2>/dev/null | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
t0=$(date +%s)
KERNEL_TRACE=1 timeout 240 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >"$OUT/gemv-trace.log" 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
tail -25 "$OUT/gemv-trace.log" | grep -v '^{' | cut -c1-300
python3 benchmarks/gpu/summaries.py gemv-trace "$OUT/gemv-trace.json" 2>&1 | tee -a "$S"
echo "=== summary"; cat "$S"
