#!/usr/bin/env bash
# H200, session 18, third call: windowed_rfft (the window in fft_shared's
# load) and FFT inputs read as rows in blocks, new since call a: the FFT,
# window and signal suites on cuda at the device's group size and at 64,
# memcheck and racecheck on them; the log-mel breakdown and fft_cuda.py's
# table again; the GEMV sweep's CUPTI kernel durations (call b's trace
# failed on kernel names). Only eight files come back: the set-up logs are
# moved out of $OUT at the end. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
W="tests/ops/test_fft.py tests/ops/test_fft_window.py"
suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
sanitize memcheck "memcheck window + rfft" memcheck.log $W -k "window or frames or rfft" --rlx-device cuda
sanitize racecheck "racecheck window + rfft" racecheck.log $W -k "window or frames or swizzle" --rlx-device cuda
fft_benches
t0=$(date +%s)
KERNEL_TRACE=1 timeout 200 python3 benchmarks/gpu/quant_gemv_cuda.py "$OUT/gemv-trace.json" >/tmp/gemv-trace.log 2>&1
note "gemv trace rc=$? in $(( $(date +%s) - t0 )) s"
python3 benchmarks/gpu/summaries.py gemv-trace "$OUT/gemv-trace.json" 2>&1 | tee -a "$S"
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
