#!/usr/bin/env bash
# Device, after run_session33_d.sh (issue 19; written in session 33, not
# yet run): the committed register form (the inverse as the conjugate's
# forward transform, RLX_FFT_REGISTER_CONJ=1) through rlx: the FFT, window
# and signal suites on cuda at group sizes 0 and 64 with fft_variants.py,
# fft_cuda.py's table with the log-mel breakdown, then racecheck and
# memcheck on the register form's cases (as run_session33_c.sh did for
# the run-time-sign form); then the four-step on the GPU.
source "$(dirname "$0")/common.sh"
fft_suites conjugate
fft_benches
fft_sanitizers
# The four-step on the GPU (RLX_FFT_GPU_FOUR_STEP=1): the suites' long
# powers of two, memcheck on them, then fft_cuda.py's table (65536 is the
# case to watch) against the default's above.
RLX_FFT_GPU_FOUR_STEP=1 suite "fft four-step (cuda)" fft4.log tests/ops/test_fft.py --rlx-device cuda \
  -k "four_step or N8192 or N65536"
RLX_FFT_GPU_FOUR_STEP=1 SAN_TIMEOUT=100 sanitize memcheck "memcheck four-step" memcheck-4.log tests/ops/test_fft.py \
  --rlx-device cuda -k "N8192 or N65536"
RLX_FFT_GPU_FOUR_STEP=1 timeout 100 python3 benchmarks/gpu/fft_cuda.py "$OUT/fft-cuda-four-step.json" 2>/dev/null \
  | python3 benchmarks/gpu/summaries.py fft-cuda 2>&1 | tee -a "$S"
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
