"""The ctypes mirrors of the shim ABI's structs (rlx/runtime/shim.py) lay
out every field where the C compiler puts it in csrc/rlx_shim.h: a field
appended to one side only (as rlx_gemm_desc.scale_mode was) would hand the
shims a descriptor of the wrong size with every later field misread."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from rlx.runtime import shim

ROOT = Path(__file__).resolve().parents[2]
CC = shutil.which("cc") or shutil.which("gcc")
MIRRORS = {"rlx_device_info": shim.DeviceInfoC, "rlx_pipeline_info": shim.PipelineInfoC,
           "rlx_gemm_desc": shim.GemmDescC, "rlx_schedule_cmd": shim.ScheduleCmdC,
           "rlx_schedule_desc": shim.ScheduleDescC, "rlx_shim_api": shim.ShimApi}


def _c_layout(tmp_path: Path) -> dict[str, dict[str, int]]:
    """struct name -> {"sizeof": n, field: offset} as the C compiler lays it out."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "rlx_shim.h"', "int main(void) {"]
    for name, mirror in MIRRORS.items():
        lines.append(f'    printf("{name} sizeof %zu\\n", sizeof({name}));')
        for field, *_ in mirror._fields_:
            lines.append(f'    printf("{name} {field} %zu\\n", offsetof({name}, {field}));')
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    built = subprocess.run([CC, "-std=c11", f"-I{ROOT / 'csrc'}", str(src), "-o", str(exe)], capture_output=True,
                           text=True, timeout=120)
    assert built.returncode == 0, built.stderr[-3000:]
    out: dict[str, dict[str, int]] = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        struct, field, value = line.split()
        out.setdefault(struct, {})[field] = int(value)
    return out


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_ctypes_mirrors_match_the_c_layout(tmp_path):
    layout = _c_layout(tmp_path)
    for name, mirror in MIRRORS.items():
        want = layout[name]
        got = {field: getattr(mirror, field).offset for field, *_ in mirror._fields_}
        got["sizeof"] = ctypes.sizeof(mirror)
        assert got == want, name
