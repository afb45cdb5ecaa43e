"""The three shims read the same way (DESIGN section 7, IREE-style peers):
the same sections in the same order, and no source file much past ~1,000
lines. csrc/cuda/shim.c, csrc/host/shim.cpp and csrc/metal_shim.m are each one
translation unit that includes its section files (csrc/cuda/*.inc.c,
csrc/host/*.inc.cpp, csrc/metal/*.inc.m). Nothing here compiles anything."""

from __future__ import annotations

import re

import pytest
from shim_sources import CSRC, expanded, section_files

SHIMS = ["cuda/shim.c", "host/shim.cpp", "metal_shim.m"]

# Every shim keeps these sections, in this order (a section header is a
# `/* ---- title ---- */` or `// ---- title ----` line; a title may go on,
# "libraries: NVRTC, ...", and headers that start with none of these are
# subsections, such as the CUDA loader or the host thread pool).
SECTIONS = ["errors", "objects", "device", "buffers", "libraries", "command buffers: recording", "gemm",
            "indirect command buffers", "execution", "copies", "queues", "the ABI table"]
MAX_LINES = 1100  # "a shim that grows past ~1,000 lines is a sign that logic leaked below the ABI"

HEADER = re.compile(r"^(?:/\*|//) ---- (.+?) -{4,}", re.M)


@pytest.mark.parametrize("shim", SHIMS)
def test_sections_in_the_common_order(shim):
    order = []
    for title in HEADER.findall(expanded(CSRC / shim)):
        matches = [i for i, s in enumerate(SECTIONS) if title.startswith(s)]
        if matches:
            order.append((max(matches, key=lambda i: len(SECTIONS[i])), title))
    assert [i for i, _ in order] == sorted(i for i, _ in order), f"{shim}: sections out of order: {order}"
    missing = sorted(set(range(len(SECTIONS))) - {i for i, _ in order})
    assert not missing, f"{shim} lacks the sections {[SECTIONS[i] for i in missing]}"


@pytest.mark.parametrize("shim,folder", [("cuda/shim.c", "cuda"), ("host/shim.cpp", "host"), ("metal_shim.m", "metal")])
def test_every_section_file_is_included_once(shim, folder):
    included = section_files(CSRC / shim)
    assert all(p.is_file() for p in included), f"{shim} includes a section file that does not exist: {included}"
    assert len(included) == len(set(included))
    assert sorted(included) == sorted((CSRC / folder).glob("*.inc.*")), \
        f"{shim} must include every section file of csrc/{folder}/ (and only those)"


def test_no_source_file_is_much_past_1000_lines():
    sizes = {str(p.relative_to(CSRC)): len(p.read_text().splitlines())
             for p in CSRC.rglob("*") if p.suffix in {".c", ".cpp", ".m", ".h"}}
    assert {"cuda/shim.c", "host/shim.cpp", "metal_shim.m"} <= set(sizes)
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, f"split these into sections (csrc/cuda/ shows how): {too_long}"
