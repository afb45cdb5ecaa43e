"""A small graph (row-kernel matmul, gelu, layernorm, softmax, a strided
sum) compiled for a device and checked against the numpy reference, run
twice (the second run replays): the quickest end-to-end check that kernels
get their params (session 48: by value on CUDA).
Usage: [KERNEL_DEFINES=...] python3 benchmarks/gpu/params_smoke.py [DEVICE]"""
import sys

import numpy as np
from kernel_defines import apply_kernel_defines  # benchmarks/gpu/kernel_defines.py (the script's own folder)

import rlx

apply_kernel_defines()

dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
rng = np.random.default_rng(0)
g = rlx.Graph()
x = g.input("x", (5, 37))
w = g.param("w", (37, 19))
h = g.gelu(g.matmul(x, w))
y = g.softmax(g.layernorm(h, g.param("gamma", (19,)), g.param("beta", (19,))))
g.set_outputs(y=y, s=g.sum(g.transpose(h, (1, 0)), axis=-1))
params = {"w": rng.standard_normal((37, 19)).astype(np.float32), "gamma": rng.random(19).astype(np.float32) + 0.5,
          "beta": rng.standard_normal(19).astype(np.float32)}
xv = rng.standard_normal((5, 37)).astype(np.float32)
exe = rlx.compile(g, device=dev, params=params)
for _ in range(2):   # the second run replays
    got = exe.run(x=xv)
ref = rlx.run_reference(g, {"x": xv}, params)
for k in ref:
    err = float(np.max(np.abs(got[k] - ref[k])))
    print("smoke", k, "max abs err", err)
    assert err < 1e-3, k
print("smoke ok")
