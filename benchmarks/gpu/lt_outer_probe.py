"""What cuBLASLt offers for FP8 x FP8 with outer-vector scales (issue 20):
one f32 scale per row of x and one per output channel of w
(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F on both operands, the call
torch._scaled_mm's rowwise form makes). For each output dtype (f32, f16,
bf16) and shape: the heuristic's algorithm count and, where there is one,
the product against float64 of the dequantized operands and its time
against the per-tensor form of the same call, through ctypes on the cuBLASLt
that torch loaded (CUDA events, 50 calls).

Run: python3 benchmarks/gpu/lt_outer_probe.py OUT.json"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys

import torch

# cublasLt.h values (the CUDA 12.9 / 13 headers).
COMPUTE_32F, R_32F, R_16F, R_16BF, R_8F_E4M3 = 68, 0, 2, 14, 28
DESC_TRANSA, DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER = 3, 17, 18
DESC_A_SCALE_MODE, DESC_B_SCALE_MODE = 31, 32
SCALE_SCALAR_32F, SCALE_OUTER_VEC_32F = 0, 3
PREF_MAX_WORKSPACE_BYTES = 1
OP_T = 1
WORKSPACE = 4 << 20   # rlx's cuBLASLt workspace (csrc/cuda/shim.c LT_WORKSPACE)
SHAPES = {"square": (4096, 4096, 4096), "minilm_up": (4096, 1536, 384), "gemma270m_m128_qkv": (128, 1280, 640),
          "gemma270m_m128_down": (128, 640, 2048)}
OUT_TYPES = {"f32": (R_32F, torch.float32), "f16": (R_16F, torch.float16), "bf16": (R_16BF, torch.bfloat16)}


def _library() -> ctypes.CDLL:
    """The cuBLASLt torch mapped (so rlx's shim, which searches the same
    wheels first, would find the same one)."""
    a = torch.zeros(16, 16, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    torch._scaled_mm(a, a.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)   # maps cuBLASLt
    for line in open("/proc/self/maps"):
        if "libcublasLt.so" in line:
            return ctypes.CDLL(line.split()[-1])
    for path in glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcublasLt.so*")):
        return ctypes.CDLL(path)
    raise SystemExit("no libcublasLt found")


LT = _library()
P = ctypes.c_void_p
_VEC = torch.ones(4096, device="cuda")   # a scale vector the heuristic can be shown


def check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what}: status {status}")


class Heuristic(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def set_attr(fn, obj, attr: int, value) -> int:
    return fn(obj, attr, ctypes.byref(value), ctypes.sizeof(value))


def descriptor(modes: tuple[int, int], attrs: tuple[int, int] = (DESC_A_SCALE_MODE, DESC_B_SCALE_MODE),
               pointers: bool = True):
    """A matmul descriptor in rlx's "TN" form with scale modes ``modes`` set
    through attributes ``attrs``, and (``pointers``) both scale pointers
    set: (desc, the status of each step)."""
    desc = P()
    check(LT.cublasLtMatmulDescCreate(ctypes.byref(desc), COMPUTE_32F, R_32F), "desc")
    check(set_attr(LT.cublasLtMatmulDescSetAttribute, desc, DESC_TRANSA, ctypes.c_int32(OP_T)), "transa")
    steps = {"set_a": set_attr(LT.cublasLtMatmulDescSetAttribute, desc, attrs[0], ctypes.c_int32(modes[0])),
             "set_b": set_attr(LT.cublasLtMatmulDescSetAttribute, desc, attrs[1], ctypes.c_int32(modes[1]))}
    if pointers:   # the heuristic refuses vector modes while the scale pointers are NULL
        steps["pointers"] = [set_attr(LT.cublasLtMatmulDescSetAttribute, desc, attr, P(_VEC.data_ptr()))
                             for attr in (DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER)]
    return desc, steps


def heuristic(handle, desc, m: int, n: int, k: int, out_type: int):
    """(layouts, results, status, count) for row-major D[m, n] = x[m, k] @ w[n, k]^T,
    i.e. column-major D^T[n, m] = w (k x n, transposed) times x^T (k x m)."""
    layouts = []
    for rows, cols, ld, t in ((k, n, k, R_8F_E4M3), (k, m, k, R_8F_E4M3), (n, m, n, out_type), (n, m, n, out_type)):
        lay = P()
        check(LT.cublasLtMatrixLayoutCreate(ctypes.byref(lay), t, ctypes.c_uint64(rows), ctypes.c_uint64(cols),
                                            ctypes.c_int64(ld)), "layout")
        layouts.append(lay)
    pref = P()
    check(LT.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "pref")
    check(set_attr(LT.cublasLtMatmulPreferenceSetAttribute, pref, PREF_MAX_WORKSPACE_BYTES,
                   ctypes.c_uint64(WORKSPACE)), "pref ws")
    results = (Heuristic * 8)()
    found = ctypes.c_int(0)
    status = LT.cublasLtMatmulAlgoGetHeuristic(handle, desc, *layouts, pref, 8, results, ctypes.byref(found))
    LT.cublasLtMatmulPreferenceDestroy(pref)
    return layouts, results, status, found.value


def plan(handle, m: int, n: int, k: int, out_type: int, outer: bool):
    """(desc, layouts, heuristic results, count; a negative count is the
    failing status) of the outer-vector or the per-tensor form."""
    mode = SCALE_OUTER_VEC_32F if outer else SCALE_SCALAR_32F
    desc, steps = descriptor((mode, mode), pointers=outer)
    if steps["set_a"] or steps["set_b"]:
        return desc, None, None, -(steps["set_a"] or steps["set_b"])   # this cuBLASLt has no scale modes
    layouts, results, status, found = heuristic(handle, desc, m, n, k, out_type)
    return desc, layouts, results, (found if status == 0 else -status)


def run_case(handle, name: str, m: int, n: int, k: int, out_name: str) -> dict:
    out_type, torch_type = OUT_TYPES[out_name]
    row: dict = {"shape": name, "m": m, "n": n, "k": k, "out": out_name}
    g = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(m, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    xs = torch.rand(m, device="cuda", generator=g) + 0.5
    ws = torch.rand(n, device="cuda", generator=g) + 0.5
    ts = torch.tensor([0.75], device="cuda")
    want = (x.double() * xs.double()[:, None]) @ (w.double() * ws.double()[:, None]).T
    ws_buf = torch.empty(WORKSPACE, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    for form, outer in (("outer", True), ("tensor", False)):
        desc, layouts, results, found = plan(handle, m, n, k, out_type, outer)
        row[f"{form}_algorithms"] = found
        if found <= 0:
            continue
        d = torch.empty(m, n, dtype=torch_type, device="cuda")
        # Lt's A is w (its scale: per output channel), its B is x (per row).
        a_scale, b_scale = (ws, xs) if outer else (ts, ts)
        check(set_attr(LT.cublasLtMatmulDescSetAttribute, desc, DESC_A_SCALE_POINTER, P(a_scale.data_ptr())), "sa")
        check(set_attr(LT.cublasLtMatmulDescSetAttribute, desc, DESC_B_SCALE_POINTER, P(b_scale.data_ptr())), "sb")

        def call(desc=desc, layouts=layouts, d=d, results=results):
            check(LT.cublasLtMatmul(handle, desc, ctypes.byref(one), P(w.data_ptr()), layouts[0], P(x.data_ptr()),
                                    layouts[1], ctypes.byref(zero), P(d.data_ptr()), layouts[2], P(d.data_ptr()),
                                    layouts[3], ctypes.byref(results[0].algo), P(ws_buf.data_ptr()),
                                    ctypes.c_size_t(WORKSPACE), P(stream)), "matmul")

        call()
        torch.cuda.synchronize()
        ref = want if outer else (x.double() * 0.75) @ (w.double() * 0.75).T
        mag = (x.double().abs() * (xs.double()[:, None] if outer else 0.75)) @ \
              (w.double().abs() * (ws.double()[:, None] if outer else 0.75)).T
        excess = ((d.double() - ref).abs() - (2e-6 * mag + 2 ** -8 * ref.abs())).max().item()
        row[f"{form}_max_excess"] = excess
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(5):
            call()
        start.record()
        for _ in range(50):
            call()
        end.record()
        torch.cuda.synchronize()
        row[f"{form}_us"] = start.elapsed_time(end) * 1000 / 50
    if out_name == "bf16":
        f = lambda: torch._scaled_mm(x, w.T, scale_a=xs[:, None].contiguous(), scale_b=ws[None, :].contiguous(),  # noqa: E731
                                     out_dtype=torch.bfloat16)
        f()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            f()
        end.record()
        torch.cuda.synchronize()
        row["torch_rowwise_us"] = start.elapsed_time(end) * 1000 / 50
    return row


def which_step_fails(handle) -> list[dict]:
    """Where the outer-vector request fails, step by step (session 47's first
    run got status 7, CUBLAS_STATUS_INVALID_VALUE, for every output dtype):
    each (A mode, B mode) pair and attribute numbering, at 4096^3 into bf16,
    with the scale pointers set before the heuristic when PROBE_POINTERS=1."""
    rows = []
    for attrs in ((31, 32), (32, 33)):
        for modes in ((3, 3), (3, 0), (0, 3), (0, 0)):
            desc, steps = descriptor(modes, attrs, pointers=os.environ.get("PROBE_POINTERS") == "1")
            _, _, status, found = heuristic(handle, desc, 4096, 4096, 4096, R_16BF)
            rows.append({"attrs": list(attrs), "modes": list(modes), **steps, "heuristic": status, "found": found})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    handle = P()
    check(LT.cublasLtCreate(ctypes.byref(handle)), "create")
    if os.environ.get("PROBE_STEPS") == "1":
        json.dump({"cublasLt_version": LT.cublasLtGetVersion(), "steps": which_step_fails(handle)},
                  open(sys.argv[1], "w"), indent=1)
        return
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cublasLt_version": LT.cublasLtGetVersion(), "rows": []}
    print("cublasLt", out["cublasLt_version"], flush=True)
    for name, (m, n, k) in SHAPES.items():
        for out_name in OUT_TYPES:
            try:
                row = run_case(handle, name, m, n, k, out_name)
            except Exception as exc:   # one case's failure is data; the others still run
                row = {"shape": name, "out": out_name, "error": repr(exc)}
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
