"""`rlx shaders --emit TARGET DIR`: write the kernel source a target compiles.

The GPU shims compile one flattened text (prelude + every kernel, see
rlx.runtime.shader_source). Writing it to a file lets it be read, diffed, or
compiled offline: `xcrun metal -c rlx_kernels.metal` on a Mac, `nvcc --ptx
rlx_kernels.cu` anywhere, `c++ -fsyntax-only rlx_kernels.cpp`.
"""

from __future__ import annotations

from pathlib import Path

from rlx.runtime.shader_source import TARGETS, kernel_source

SUFFIX = {"metal": ".metal", "cuda": ".cu", "cpu": ".cpp"}
assert set(SUFFIX) == set(TARGETS), "every shader target needs a file suffix"


def emit(target: str, out_dir: Path) -> Path:
    """Writes kernel_source(target) to <out_dir>/rlx_kernels.<metal|cu|cpp>
    (creating out_dir) and returns the file's path. An unknown target raises
    RlxError before anything is written."""
    source = kernel_source(target)  # validates target
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"rlx_kernels{SUFFIX[target]}"
    path.write_text(source)
    return path
