"""Work of a thunk as the cost model and the calibration count it: its
kernel family, bytes moved, flops, and fixed per-dispatch overhead.
Shared by rlx/tune/cost.py and rlx/tune/calibrate.py; reads the thunks
rlx/lowering/ emits."""

from __future__ import annotations

from typing import Any

from rlx.lowering import GEMM

# Work unit of each family's rate in Calibration.family_rates: "B" = bytes
# read + written, "flop" = floating-point operations.
FAMILY_UNITS: dict[str, str] = {
    "elementwise": "B", "unary": "B", "copy": "B", "epilogue": "B", "epilogue_act": "B", "softmax": "B",
    "softmax_masked": "B", "norm": "B", "quant_gemv": "B", "quant_gemv_m8": "B", "dequantize": "B",
    "attention": "flop", "matmul_rows": "flop", "gemm": "flop",
    "fft_shared": "flop", "fft_stage": "B",
}

def family_of(thunk: Any) -> str:
    """The cost family of a thunk: gemm, or what its lowering declared
    (``Thunk.work.family``: matmul_rows or a key of
    Calibration.family_rates)."""
    return "gemm" if thunk.kind == GEMM else thunk.work.family


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
    """Flops of a gemm, or what the lowering declared (``Thunk.work.flops``:
    attention and matmul_rows; 0 for the byte-counted families)."""
    if thunk.kind == GEMM:
        g = thunk.gemm
        return 2.0 * g["m"] * g["n"] * g["k"] * g.get("batch", 1) * g.get("outer", 1)
    return thunk.work.flops


def thunk_work(thunk: Any) -> float:
    """Work in the unit of the thunk's family (FAMILY_UNITS)."""
    return thunk_flops(thunk) if FAMILY_UNITS.get(family_of(thunk)) == "flop" else float(thunk_bytes(thunk))


def dispatch_overhead(calib: Any, thunk: Any) -> float:
    """Fixed seconds of a thunk: a gemm call, or a one-group / spread dispatch."""
    if thunk.kind == GEMM:
        return calib.gemm_call_s
    return calib.dispatch_s if group_count(thunk) == 1 else calib.dispatch_parallel_s
