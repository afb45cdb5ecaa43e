"""The three shims read the same way (DESIGN section 7, IREE-style peers):
the same sections in the same order, and no source file much past ~1,000
lines. csrc/cuda/shim.c and csrc/host/shim.cpp are each one translation unit
that includes its section files (csrc/cuda/*.inc.c, csrc/host/*.inc.cpp);
csrc/metal_shim.m is one file. Nothing here compiles anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"
SHIMS = ["cuda/shim.c", "host/shim.cpp", "metal_shim.m"]

# Every shim keeps these sections, in this order (a section header is a
# `/* ---- title ---- */` or `// ---- title ----` line; a title may go on,
# "libraries: NVRTC, ...", and headers that start with none of these are
# subsections, such as the CUDA loader or the host thread pool).
SECTIONS = ["errors", "objects", "device", "buffers", "libraries", "command buffers: recording", "gemm",
            "indirect command buffers", "execution", "copies", "queues", "the ABI table"]
MAX_LINES = 1100  # "a shim that grows past ~1,000 lines is a sign that logic leaked below the ABI"

INCLUDE = re.compile(r'^#include "(\w+\.inc\.\w+)"\s*$', re.M)
HEADER = re.compile(r"^(?:/\*|//) ---- (.+?) -{4,}", re.M)


def expanded(path: Path) -> str:
    """The shim's text with its section files included in place, as the compiler reads it."""
    return INCLUDE.sub(lambda m: expanded(path.parent / m.group(1)), path.read_text())


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


@pytest.mark.parametrize("folder", ["cuda", "host"])
def test_every_section_file_is_included_once(folder):
    main = next((CSRC / folder).glob("shim.*"))
    included = INCLUDE.findall(main.read_text())
    assert len(included) == len(set(included))
    assert sorted(included) == sorted(p.name for p in (CSRC / folder).glob("*.inc.*")), \
        f"{main} must include every section file of csrc/{folder}/ (and only those)"


def test_no_source_file_is_much_past_1000_lines():
    sizes = {str(p.relative_to(CSRC)): len(p.read_text().splitlines())
             for p in CSRC.rglob("*") if p.suffix in {".c", ".cpp", ".m", ".h"}}
    assert {"cuda/shim.c", "host/shim.cpp", "metal_shim.m"} <= set(sizes)
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, f"split these into sections (csrc/cuda/ shows how): {too_long}"
