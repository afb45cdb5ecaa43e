#!/usr/bin/env bash
# Device, after run_session33_d.sh (issue 19; written in session 33, not
# yet run): the committed register form (the inverse as the conjugate's
# forward transform, RLX_FFT_REGISTER_CONJ=1) through rlx: the FFT, window
# and signal suites on cuda at group sizes 0 and 64 with fft_variants.py,
# fft_cuda.py's table with the log-mel breakdown, then racecheck and
# memcheck on the register form's cases (as run_session33_c.sh did for
# the run-time-sign form).
source "$(dirname "$0")/common.sh"
fft_suites conjugate
fft_benches
fft_sanitizers
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
