"""The programmatic-launch contract of the CUDA prelude (shaders/prelude/cuda.h):
a kernel may start while the kernel before it finishes, and reading its
group or thread index is what waits for that kernel's writes. So no kernel
may touch a buffer before it reads an index. splat_ranges broke this (it
read the pair count first) and drew stale tile ranges on the H200 at 256
threads a group, while the sanitizers, which serialize kernels, saw
nothing; hence a check of the source, for every kernel in shaders/."""

from __future__ import annotations

import re
from pathlib import Path

SHADERS = Path(__file__).resolve().parents[2] / "shaders"
# What reads an index (and so waits on CUDA), or loops over indices.
INDEX_USE = re.compile(r"rlx_group_id|rlx_local_id|RLX_FOR_RANGE|RLX_FOR_GROUP|rlx_simd_lane|rlx_simd_id")
KERNEL = re.compile(r"RLX_KERNEL\s+(\w+)\((.*?)\)\s*\{", re.S)
BUFFER = re.compile(r"RLX_BUF\([^,]+,\s*(\w+),")


def buffer_uses_before_the_first_index(source: str) -> list[tuple[str, str]]:
    """(kernel, buffer) for each buffer indexed or dereferenced in a kernel
    body before its first index read."""
    found = []
    for m in KERNEL.finditer(source):
        body = source[m.end():]
        first = INDEX_USE.search(body)
        head = body[: first.start()] if first else body
        for name in BUFFER.findall(m.group(2)):
            if re.search(rf"\b{name}\s*\[|\*\s*{name}\b", head):   # an index or a dereference, not pointer arithmetic
                found.append((m.group(1), name))
    return found


def test_no_kernel_touches_a_buffer_before_reading_an_index():
    bad = {f.name: buffer_uses_before_the_first_index(f.read_text()) for f in sorted(SHADERS.glob("*.h"))}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"buffers touched before the first index read (the CUDA PDL wait): {bad}"


def test_the_check_finds_a_buffer_read_before_the_index():
    planted = """
template <typename T>
RLX_KERNEL k(RLX_BUF(RLX_DEVICE const int *, count, 0), RLX_BUF(RLX_DEVICE T *, out, 1),
             RLX_PARAMS(P, p, 2) RLX_IDS) {
    const int n = count[0];
    RLX_FOR_RANGE(i, n) { out[i] = 0; }
}
"""
    assert buffer_uses_before_the_first_index(planted) == [("k", "count")]
    fixed = planted.replace("const int n = count[0];", "(void)rlx_group_id;\n    const int n = count[0];")
    assert buffer_uses_before_the_first_index(fixed) == []
