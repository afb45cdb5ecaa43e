"""fft_shared's compile-time choices timed against each other on the H200
(issue 19): run once per KERNEL_DEFINES variant (benchmarks/gpu/
kernel_defines.py), each process printing one JSON line: the kernel's own
duration (CUPTI, inside a replay with no copies) for batched complex
transforms of about 2^22 points at N = 256, 1024 and 4096 and the mixed
radix N = 200 (log-mel's half-length rfft) and 1000, checked against
numpy.fft first, beside cuFFT's kernel in the same process.

    KERNEL_DEFINES="RLX_FFT_MIN_GROUPS=3" python3 benchmarks/gpu/fft_variants.py"""

from __future__ import annotations

import json

import numpy as np
import torch
from cuda_timing import bare_replay, graph_of, kernel_table  # benchmarks/gpu/cuda_timing.py
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py

import rlx


def main() -> None:
    defines = apply_kernel_defines()
    row = {"defines": defines}
    for n in (256, 1024, 4096, 200, 1000):
        batch = (1 << 22) // n
        rng = np.random.default_rng(n)
        x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(np.complex64)
        g = rlx.Graph()
        g.set_outputs(y=g.fft(g.input("x", x.shape, "c64")))
        exe = rlx.compile(g, device="cuda")
        got = exe.run(x=x)["y"]
        want = np.fft.fft(x.astype(np.complex128))
        err = float(np.abs(got - want).max() / np.abs(want).max())
        bare = bare_replay(exe)
        tx = torch.from_numpy(x).cuda()
        graph = graph_of(lambda tx=tx: torch.fft.fft(tx))
        rlx_us = kernel_table(lambda bare=bare: bare.run([], []))["kernel_us_per_run"]
        cufft_us = kernel_table(graph.replay)["kernel_us_per_run"]
        row[str(n)] = {"rel_err": err, "rlx_kernel_us": rlx_us, "cufft_kernel_us": cufft_us,
                       "ratio": rlx_us / cufft_us}
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
