"""Is the replay floor's device time in rlx's kernels or in its path? The
floor's chain (65 dependent adds of 16 floats) replayed through a bare
Program three ways: the built-in binary kernel the compiler emits, a
minimal add with no params struct, and the same reading one param before
its first index (as the built-in kernels do). Same Program, shim and CUDA
graph for all three, so their difference is the kernel body's. The two
small kernels also run built with the prelude's earlier PDL order (wait,
then let the next kernel launch: -DRLX_PDL_TRIGGER_AFTER_WAIT), against
today's (let the next kernel launch, then wait).

A development aid for issue 6.  On the H200:  python3 benchmarks/gpu/floor_kernels.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from rlx._core import ARENA, Bindings, Program, ThunkTable

sys.path.insert(0, "benchmarks/gpu")
from bert_cuda import floor_programs, median_ms  # noqa: E402

from rlx.runtime import shim  # noqa: E402

SOURCE = """
struct Add16Params { uint n; uint pad[3]; };
template <typename T>
RLX_KERNEL add16(RLX_BUF(RLX_DEVICE T *, x, 0), RLX_BUF(RLX_DEVICE const T *, b, 1) RLX_IDS) {
    const uint i = rlx_local_id.x;
    if (i < 16u) x[i] += b[i];
}
RLX_INSTANTIATE(add16, float, add16_f32)
template <typename T>
RLX_KERNEL add16p(RLX_BUF(RLX_DEVICE T *, x, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                  RLX_PARAMS(Add16Params, p, 2) RLX_IDS) {
    const uint n = p->n;
    const uint i = rlx_local_id.x;
    if (i < n) x[i] += b[i];
}
RLX_INSTANTIATE(add16p, float, add16p_f32)
template <typename T>
RLX_KERNEL add16loop(RLX_BUF(RLX_DEVICE T *, x, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                     RLX_PARAMS(Add16Params, p, 2) RLX_IDS) {
    const uint n = p->n;
    RLX_FOR_RANGE(i, n) { x[i] += b[i]; }
}
RLX_INSTANTIATE(add16loop, float, add16loop_f32)
"""


def chain_program(dev, buf, pipe, offsets, keepalive) -> Program:
    """65 dependent dispatches of ``pipe`` binding ``buf`` at ``offsets``, replayed."""
    table = ThunkTable(Bindings((ARENA,)))
    for i in range(65):
        table.append_dispatch(pipe.address, [(ARENA, off) for off in offsets], (1, 1, 1), (32, 1, 1), barrier=i > 0)
    return Program(dev.shim.api_address, dev.address, table, {ARENA: buf.address}, [], [], replay=True,
                   keepalive=keepalive)


def replay_us(prog: Program, runs: int = 3000) -> float:
    return 1e3 * median_ms(lambda: prog.run([], []), warmup=200, runs=runs, sync=False)


def main() -> None:
    exe, bare = floor_programs()
    dev = exe.device
    lib = dev.compile_library(SOURCE)
    buf = dev.alloc(4096)
    buf.write(0, np.zeros(16, np.float32))
    buf.write(256, np.ones(16, np.float32))
    buf.write(512, np.array([16, 0, 0, 0], np.uint32))
    late = dev.compile_library(SOURCE, "-DRLX_PDL_TRIGGER_AFTER_WAIT")
    out = {"builtin_binary_chain_us": replay_us(bare)}
    for suffix, library in (("", lib), ("_trigger_after_wait", late)):
        for name, offsets in (("add16_f32", (0, 256)), ("add16p_f32", (0, 256, 512))):
            pipe = library.pipeline(name, shim.PIPELINE_INDIRECT)
            out[f"{name}_chain{suffix}_us"] = replay_us(chain_program(dev, buf, pipe, offsets, (buf, library, pipe)))
    # The grid-stride loop (RLX_FOR_RANGE), and the built-in binary kernel's
    # source as a user kernel at 32 threads with the compiled graph's params.
    loop = lib.pipeline("add16loop_f32", shim.PIPELINE_INDIRECT)
    binary_lib = dev.compile_library(Path("shaders/binary.h").read_text())
    binary = binary_lib.pipeline("binary_f32", shim.PIPELINE_INDIRECT)
    buf.write(1024, np.frombuffer(exe.thunks[1].params, np.uint8))
    first = exe.thunks[1]
    out["builtin_binary_dispatch"] = [list(first.groups), list(first.threads)]
    for name, pipe, offsets in (("add16loop_f32", loop, (0, 256, 512)),
                                ("binary_user_32_threads", binary, (0, 256, 0, 1024))):
        out[f"{name}_chain_us"] = replay_us(chain_program(dev, buf, pipe, offsets, (buf, lib, binary_lib, pipe)))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
