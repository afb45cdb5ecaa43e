"""Where the host time of one replayed run goes, for the replay floor's
program (65 tiny dependent kernels, replay + synchronize). Needs the CUDA
shim built with -DRLX_CUDA_PHASE_TIMES (benchmarks/gpu/floor_phases.sh); the
shim prints its per-step means at exit, this prints the whole run's.

A development aid for issue 6's floor target."""

from __future__ import annotations

import json
import statistics
import sys
import time

sys.path.insert(0, "benchmarks/gpu")
from bert_cuda import floor_programs  # noqa: E402


def main() -> None:
    _, bare = floor_programs()
    for _ in range(200):
        bare.run([], [])
    times = []
    for _ in range(3000):
        t = time.perf_counter()
        bare.run([], [])
        times.append(time.perf_counter() - t)
    print(json.dumps({"runs": len(times), "median_us": 1e6 * statistics.median(times),
                      "mean_us": 1e6 * statistics.fmean(times)}), flush=True)


if __name__ == "__main__":
    main()
