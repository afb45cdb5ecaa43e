"""The CPU quantized GEMVs fetch their weight rows ahead in software
(shaders/quant_gemv.h, rlx_q_prefetch_row): narrow rows, such as the
640-wide vocabulary projection of the LLM decode step, stream from memory
well below the read rate on the hardware prefetcher alone.

A prefetch has no effect the compiler must keep, so where GCC outlined
the helper's loop (partial inlining) it then deleted the call as free of
side effects, and every GEMV shipped without its prefetch (session 49:
262144 x 640 q8_0 on two threads went from 15.3 to 18.8 GB/s once the helper
was forced inline). Nothing numeric can show that, so this checks the built
library's machine code: every instance of the row loops has a prefetch
instruction."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import rlx

LIBRARY = Path(rlx.__file__).resolve().parent / "lib" / "librlx_host.so"
OBJDUMP = shutil.which("objdump")
ROW_LOOPS = re.compile(r"rlx_q_gemv_cpu<|rlx_qint_rows<")


def function_bodies(disassembly: str) -> dict[str, str]:
    """Each function of an `objdump -d -C` listing: its header line -> its instructions."""
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in disassembly.splitlines():
        if re.match(r"^[0-9a-f]+ <.*>:$", line):
            current = bodies.setdefault(line, [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in bodies.items()}


def test_function_bodies_split_a_listing():
    listing = """
0000000000001000 <void rlx_q_gemv_cpu<Q, float>(float const*)>:
    1000:\tprefetcht1 0x40(%rax)
    1004:\tret

0000000000002000 <other()>:
    2000:\tret
"""
    bodies = function_bodies(listing)
    assert list(bodies) == ["0000000000001000 <void rlx_q_gemv_cpu<Q, float>(float const*)>:",
                            "0000000000002000 <other()>:"]
    assert "prefetcht1" in bodies["0000000000001000 <void rlx_q_gemv_cpu<Q, float>(float const*)>:"]
    assert "prefetch" not in bodies["0000000000002000 <other()>:"]


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 prefetch instructions")
@pytest.mark.skipif(OBJDUMP is None, reason="objdump (binutils) is not installed")
@pytest.mark.skipif(not LIBRARY.exists(), reason="librlx_host.so is not built")
def test_every_quant_gemv_row_loop_prefetches_ahead():
    listing = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", "-C", str(LIBRARY)], capture_output=True,
                             text=True, check=True).stdout
    loops = {name: body for name, body in function_bodies(listing).items() if ROW_LOOPS.search(name)}
    # One per format and float type in each instruction-set build: a
    # library without them was built some other way, and checks nothing.
    assert len(loops) >= 20, sorted(loops)[:5]
    missing = [name for name, body in loops.items() if "prefetch" not in body]
    assert not missing, missing[:5]
