"""Where the host time of one replayed run goes, for the replay floor's
program (65 tiny dependent kernels, replay + synchronize). Needs the CUDA
shim built with -DRLX_CUDA_PHASE_TIMES (benchmarks/gpu/floor_phases.sh); the
shim prints its per-step means at exit, this prints the whole run's.

A development aid for issue 6's floor target."""

from __future__ import annotations

import json
import sys

sys.path.insert(0, "benchmarks/gpu")
from bert_cuda import floor_programs  # noqa: E402
from floor_kernels import replay_us  # noqa: E402


def main() -> None:
    _, bare = floor_programs()
    print(json.dumps({"runs": 3000, "median_us": replay_us(bare, 3000)}), flush=True)


if __name__ == "__main__":
    main()
