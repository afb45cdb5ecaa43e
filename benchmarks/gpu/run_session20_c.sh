#!/usr/bin/env bash
# Ran with shaders/fft.h's unroll marks, since reverted (slower), and nvrtc_exp/ made locally.
# H200, session 20, third call: call b found NVRTC's fft_shared with a
# 64-byte stack (nvcc 13.0: none). fft.h now marks every loop of the DIT
# stages for unrolling. nvrtc_resources.py compiles fft.h alone (flattened
# before and after the change: nvrtc_exp/, made locally, not committed)
# with and without --split-compile; kernel_resources.py reads the rebuilt
# library; then the FFT suites on cuda, fft_variants.py's kernel times and
# fft_benches. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
timeout 120 python3 benchmarks/gpu/nvrtc_resources.py fft_shared nvrtc_exp/fft_old.cu nvrtc_exp/fft_new.cu 2>&1 | tee -a "$S"
HEADERS="fft.h" timeout 120 python3 benchmarks/gpu/kernel_resources.py fft_shared 2>&1 | tee -a "$S"
suite "fft + window + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/ops/test_fft_window.py tests/test_signal.py --rlx-device cuda
t0=$(date +%s)
timeout 150 python3 benchmarks/gpu/fft_variants.py >>"$OUT/fft-variants.jsonl" 2>>"$OUT/fft-variants-err.log"
note "variant [] rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/fft-variants.jsonl" | cut -c1-700)"
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
