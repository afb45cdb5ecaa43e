#!/usr/bin/env bash
# Device, session 36, call g (issue 19): fft_mixed's radix-8 passes on and
# off in one process (fft_radix8_ab.py: rfft 400, the log-mel graph of 1
# and 16 clips), after call f's log-mel of one clip read 1.37x PyTorch's
# graph where call d's read 1.16x. The build, then the A/B only.
export PYTHONPATH=$PWD OUT=${OUT:-/tmp/rlx-out} PATH=/usr/local/cuda/bin:$PATH
timeout 150 python3 setup.py build_ext --inplace -q -j 16 >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
timeout 200 python3 benchmarks/gpu/fft_radix8_ab.py "$OUT/radix8-ab.json" 2>&1 | tail -20
