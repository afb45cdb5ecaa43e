"""fft_mixed with and without its radix-8 passes in one process (issue 19):
rfft 400 of 2^22 samples and the log-mel graph of 1 and 16 clips of 30 s,
each compiled with the GPUs' mixed radices (8s and 4s for the power of
two) and with the CPU's (4s and a 2), timed alternately over two rounds
(device time: the sum of the thunks' Program.run_one, as fft_cuda.py).

    PYTHONPATH=$PWD python3 benchmarks/gpu/fft_radix8_ab.py [OUT.json]"""

from __future__ import annotations

import json
import sys

import numpy as np
from fft_cuda import _rlx_device_ms  # benchmarks/gpu/fft_cuda.py (the script's own folder)
from results import emit  # benchmarks/gpu/results.py

import rlx
from rlx import signal
from rlx.lowering import fft as fft_lowering

ALL_RADICES = fft_lowering.mixed_radices


def _graph(case: str) -> tuple[rlx.Graph, dict]:
    g = rlx.Graph()
    rng = np.random.default_rng(0)
    if case == "rfft 400":
        x = rng.standard_normal(((1 << 22) // 400, 400)).astype(np.float32)
        g.set_outputs(y=g.rfft(g.input("x", x.shape)))
        return g, {"x": x}
    clips = int(case.split()[1])
    y = rng.standard_normal((clips, 16000 * 30)).astype(np.float32)
    g.set_outputs(m=signal.log_mel_spectrogram(g, g.input("y", y.shape), sr=16000, n_fft=400, hop_length=160,
                                               n_mels=80, amin=1e-10))
    return g, {"y": y}


def main(out_path: str | None) -> None:
    rows = []
    for round_ in range(2):
        for eights in (True, False):
            fft_lowering.mixed_radices = lambda n, e, eights=eights: ALL_RADICES(n, e and eights)
            for case in ("rfft 400", "log-mel 1", "log-mel 16"):
                g, feeds = _graph(case)
                exe = rlx.compile(g, device="cuda")
                exe.run(**feeds)
                ms, thunks = _rlx_device_ms(exe)
                row = {"round": round_, "radix8": eights, "case": case, "rlx_device_ms": ms, "thunks": thunks}
                print(json.dumps(row), flush=True)
                rows.append(row)
    fft_lowering.mixed_radices = ALL_RADICES
    emit({"what": __doc__.splitlines()[0], "command": "PYTHONPATH=$PWD python3 benchmarks/gpu/fft_radix8_ab.py OUT",
          "rows": rows}, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
