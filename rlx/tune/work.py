"""Work of a thunk as the cost model and the calibration count it: its
kernel family, bytes moved, flops, and fixed per-dispatch overhead.
Shared by rlx/tune/cost.py and rlx/tune/calibrate.py; reads the thunks
rlx/lowering/ emits."""

from __future__ import annotations

import struct
from typing import Any

from rlx.lowering import GEMM
from rlx.lowering.linear import ACTIVATIONS

# Work unit of each family's rate in Calibration.family_rates: "B" = bytes
# read + written, "flop" = floating-point operations.
FAMILY_UNITS: dict[str, str] = {
    "elementwise": "B", "unary": "B", "copy": "B", "epilogue": "B", "epilogue_act": "B", "softmax": "B",
    "softmax_masked": "B", "norm": "B",
    "attention": "flop", "matmul_rows": "flop", "gemm": "flop",
}

# Kernel name (without its dtype suffixes) -> family. Kernels that were not
# probed map to the probed family they resemble most.
_KERNEL_FAMILY = {
    "binary": "elementwise",
    "unary": "unary", "glu": "unary", "rope": "unary",
    "copy": "copy", "gather": "copy",
    "bias_act": "epilogue",
    "softmax": "softmax", "softmax_masked": "softmax_masked", "reduce": "softmax", "argmax": "softmax",
    "layernorm": "norm", "rmsnorm": "norm", "add_layernorm": "norm", "add_rmsnorm": "norm",
    "attention": "attention",
    "matmul_rows": "matmul_rows",
}

_TRANSCENDENTAL_ACTS = frozenset(ACTIVATIONS[a] for a in ("gelu", "gelu_tanh", "silu"))


def base_kernel(name: str) -> str:
    parts = name.split("_")
    while parts and parts[-1] in ("f32", "f16"):
        parts.pop()
    return "_".join(parts)


def family_of(thunk: Any) -> str:
    """The kernel family of a thunk: gemm, matmul_rows, or a key of
    Calibration.family_rates."""
    if thunk.kind == GEMM:
        return "gemm"
    if thunk.source is not None:
        return "elementwise"   # user kernels: most are elementwise
    family = _KERNEL_FAMILY.get(base_kernel(thunk.kernel or ""), "elementwise")
    if family == "epilogue" and thunk.params and len(thunk.params) >= 28:
        # bias_act's activation (LinearParams.act): erf/exp ones cost far
        # more per byte than a bias add or relu.
        act = struct.unpack_from("<I", thunk.params, 24)[0]
        if act in _TRANSCENDENTAL_ACTS:
            return "epilogue_act"
    return family


def dtype_of(thunk: Any) -> str:
    if thunk.kind == GEMM:
        return "f16" if thunk.gemm["dtype"] == 1 else "f32"
    return "f16" if (thunk.kernel or "").endswith("f16") else "f32"


def thunk_bytes(thunk: Any) -> int:
    """Bytes the thunk reads and writes (its hazard ranges)."""
    return sum(max(end - start, 0) for _, start, end in list(thunk.reads) + list(thunk.writes))


def group_count(thunk: Any) -> int:
    g = thunk.groups
    return max(1, int(g[0]) * int(g[1]) * int(g[2]))


def thunk_flops(thunk: Any) -> float:
    """Flops of a gemm, matmul_rows or attention thunk (0 for the others)."""
    if thunk.kind == GEMM:
        g = thunk.gemm
        return 2.0 * g["m"] * g["n"] * g["k"] * g.get("batch", 1) * g.get("outer", 1)
    base = base_kernel(thunk.kernel or "")
    if base == "matmul_rows" and thunk.params and len(thunk.params) >= 12:
        m, n, k = struct.unpack_from("<3I", thunk.params)
        return 2.0 * m * n * k
    if base == "attention" and thunk.params and len(thunk.params) >= 36:
        rows, tq, tk, _hq, _group, d, dv, flags, window = struct.unpack_from("<9I", thunk.params)
        keys = float(tk)
        if flags & 2:       # causal: query i sees tk - tq + i + 1 keys
            keys = tk - tq + (tq + 1) / 2.0
        if window:
            keys = min(keys, float(window))
        # Q.K^T and P.V, plus a few flops per score for scale/mask/softmax.
        return rows * max(keys, 1.0) * (2.0 * d + 2.0 * dv + 5.0)
    return 0.0


def thunk_work(thunk: Any) -> float:
    """Work in the unit of the thunk's family (FAMILY_UNITS)."""
    return thunk_flops(thunk) if FAMILY_UNITS.get(family_of(thunk)) == "flop" else float(thunk_bytes(thunk))


def dispatch_overhead(calib: Any, thunk: Any) -> float:
    """Fixed seconds of a thunk: a gemm call, or a one-group / spread dispatch."""
    if thunk.kind == GEMM:
        return calib.gemm_call_s
    return calib.dispatch_s if group_count(thunk) == 1 else calib.dispatch_parallel_s
