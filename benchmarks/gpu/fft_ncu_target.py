"""What Nsight Compute profiles in the FFT calls (run_session16_{a,b}.sh):
a batched complex FFT of 1024 rows of 4096 points on cuda, run four times
(ncu --launch-skip 2 --launch-count 1 takes the third fft_shared launch)."""

import numpy as np

import rlx

x = (np.random.default_rng(0).standard_normal((1024, 4096)) * (1 + 1j)).astype(np.complex64)
g = rlx.Graph()
g.set_outputs(y=g.fft(g.input("x", x.shape, "c64")))
exe = rlx.compile(g, device="cuda")
for _ in range(4):
    exe.run(x=x)
