"""What Nsight Compute profiles in the FFT calls (run_session16_{a,b}.sh,
run_session19_c.sh): a batched complex FFT of 2^22 points on cuda, rows of
N points (argv[1], 4096 by default), run four times (ncu --launch-skip 2
--launch-count 1 takes the third fft_shared launch). KERNEL_DEFINES picks
a compile-time variant (benchmarks/gpu/kernel_defines.py)."""

import sys

import numpy as np
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py

import rlx

apply_kernel_defines()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
x = (np.random.default_rng(0).standard_normal(((1 << 22) // n, n)) * (1 + 1j)).astype(np.complex64)
g = rlx.Graph()
g.set_outputs(y=g.fft(g.input("x", x.shape, "c64")))
exe = rlx.compile(g, device="cuda")
for _ in range(4):
    exe.run(x=x)
