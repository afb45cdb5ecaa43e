#!/usr/bin/env bash
# H200, session 18, first call: session 16's call c, which never got a
# machine, split in two so that each half ends inside a call's ten minutes.
# This half: the FFT and signal suites on cuda and racecheck after rfft's
# unpacking moved into fft_shared's store on GPUs (rlx_fft_store_rfft, never
# run on a GPU before), then the log-mel / FFT breakdown and fft_cuda.py's
# table. Carry .gpu_carry.
source "$(dirname "$0")/common.sh"
suite "fft + signal (cuda, gs 0)" fft.log tests/ops/test_fft.py tests/test_signal.py --rlx-device cuda
suite "fft (cuda, gs 64)" fft64.log tests/ops/test_fft.py --rlx-device cuda --rlx-group-size 64
sanitize racecheck "racecheck fft_shared" racecheck-fft.log tests/ops/test_fft.py -k "swizzle or rfft" --rlx-device cuda
sanitize memcheck "memcheck rfft" memcheck-fft.log tests/ops/test_fft.py -k "rfft" --rlx-device cuda
fft_benches
echo "=== summary"; cat "$S"
