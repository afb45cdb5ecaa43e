"""A shim's source as its compiler reads it: each C shim is one translation
unit (csrc/metal_shim.m, csrc/cuda/shim.c, csrc/host/shim.cpp) that includes
its section files (csrc/metal/*.inc.m, csrc/cuda/*.inc.c, csrc/host/*.inc.cpp).
The static checks on the shims (tests/runtime/test_shim_layout.py,
test_metal_shim.py) read the text with those files put in place."""

from __future__ import annotations

import re
from pathlib import Path

CSRC = Path(__file__).resolve().parents[1] / "csrc"

# `#include "device.inc.c"` beside the including file, or `#include "metal/device.inc.m"` under csrc/.
SECTION_INCLUDE = re.compile(r'^#include "((?:\w+/)?\w+\.inc\.\w+)"\s*$', re.M)


def section_path(including: Path, name: str) -> Path:
    """The section file an include names: beside the including file, else under csrc/ (-I csrc)."""
    beside = including.parent / name
    return beside if beside.is_file() else CSRC / name


def expanded(path: Path) -> str:
    """The file's text with its section files included in place."""
    return SECTION_INCLUDE.sub(lambda m: expanded(section_path(path, m.group(1))), path.read_text())


def section_files(path: Path) -> list[Path]:
    """The section files a shim's main file includes, in order."""
    return [section_path(path, name) for name in SECTION_INCLUDE.findall(path.read_text())]
