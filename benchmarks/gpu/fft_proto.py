"""Times benchmarks/gpu/fft_proto.cu's variants against cuFFT (torch.fft)
in one process, each checked against torch.fft first (issue 19).

    python3 benchmarks/gpu/fft_proto.py [OUT.json]

Kernel time per call from CUDA events around 200 back-to-back launches of
2^22 complex points (the rows of fft_cuda.py's cases)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch
from cuda_timing import back_to_back_ms  # benchmarks/gpu/cuda_timing.py (the script's own folder)

HERE = os.path.dirname(os.path.abspath(__file__))


def build() -> ctypes.CDLL:
    out = "/tmp/fft_proto.so"
    cmd = ["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
           os.path.join(HERE, "fft_proto.cu"), "-o", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    for line in res.stderr.splitlines():
        if "registers" in line or "stack" in line or "Compiling entry" in line or "error" in line:
            print(line, flush=True)
    res.check_returncode()
    return ctypes.CDLL(out)


def main() -> None:
    lib = build()
    names = re.findall(r"^VARIANT(?:_DIT)?\((\w+),", open(os.path.join(HERE, "fft_proto.cu")).read(), re.M)
    names = [n for n in names if re.search(os.environ.get("ONLY", ""), n)]   # ONLY: a regex over the names
    stream = torch.cuda.current_stream().cuda_stream
    rows_out = []
    cufft = {}
    for name in names:
        n = int(re.match(r"n(\d+)_", name).group(1))
        rows = (1 << 22) // n
        torch.manual_seed(n)
        x = torch.randn(rows, n, dtype=torch.complex64, device="cuda")
        y = torch.empty_like(x)
        m = np.arange(n)
        tw = torch.from_numpy(np.exp(-2j * np.pi * m / n).astype(np.complex64)).cuda()
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]

        def run(fn=fn, x=x, y=y, tw=tw, rows=rows):
            rc = fn(x.data_ptr(), y.data_ptr(), tw.data_ptr(), rows, stream)
            assert rc == 0, rc

        run()
        want = torch.fft.fft(x)
        err = float((y - want).abs().max() / want.abs().max())
        ms = back_to_back_ms(run)
        if n not in cufft:
            z = torch.empty_like(x)
            eager = back_to_back_ms(lambda x=x: torch.fft.fft(x))
            graph = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.fft.fft(x)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(graph):
                gy = torch.fft.fft(x)
            del gy
            replay = back_to_back_ms(graph.replay)
            copy = back_to_back_ms(lambda x=x, z=z: z.copy_(x))
            cufft[n] = (min(eager, replay), eager, replay, copy)
        best, eager, replay, copy = cufft[n]
        row = {"variant": name, "n": n, "rows": rows, "rel_err": err, "us": ms * 1e3,
               "cufft_eager_us": eager * 1e3, "cufft_graph_us": replay * 1e3, "copy_us": copy * 1e3,
               "ratio": ms / best}
        print(json.dumps(row), flush=True)
        rows_out.append(row)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
