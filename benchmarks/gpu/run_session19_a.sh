#!/usr/bin/env bash
# H200, next session's first call: the centre padding read in place by the
# FFT's load (FftParams src_pad / src_valid / src_reflect, zeros and
# reflect), never run on a GPU (session 18's call d ran out of budget in the
# first compile): the FFT, window and signal suites on cuda at the device's
# group size and at 64, memcheck and racecheck on the padded and window
# cases, then the log-mel breakdown (does batch 16 now beat PyTorch's CUDA
# graph?) and fft_cuda.py's table. Eight files come back at most: the
# set-up logs are moved out of $OUT at the end. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
W="tests/ops/test_fft.py tests/ops/test_fft_window.py"
suite "fft + window + signal (cuda, gs 0)" fft.log $W tests/test_signal.py --rlx-device cuda
suite "fft + window (cuda, gs 64)" fft64.log $W --rlx-device cuda --rlx-group-size 64
sanitize memcheck "memcheck padded + window" memcheck.log tests/ops/test_fft_window.py --rlx-device cuda
sanitize racecheck "racecheck padded + window" racecheck.log tests/ops/test_fft_window.py -k "padded or window" --rlx-device cuda
fft_benches
mkdir -p /tmp/setup-logs && mv "$OUT"/build.log "$OUT"/pip.log "$OUT"/warm.log "$OUT"/fft64.log /tmp/setup-logs/ 2>/dev/null
echo "=== summary"; cat "$S"
