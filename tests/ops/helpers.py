"""What several op-family files share: random data, the kernels a compile
chose, a packed QKV projection, and the NaN-semantics and accuracy checks.

NaN and infinity semantics (the *_nan* tests of each family file), against
PyTorch and rlx.run_reference. One rule everywhere (numpy's and PyTorch's):
a NaN input gives NaN. maximum and minimum are NaN when either operand is;
max and softmax of a row with a NaN are NaN; argmax takes the first NaN;
relu, sigmoid, SiLU, GELU and tanh pass NaN through. The one documented
difference from torch: a softmax, masked softmax or attention row masked
everywhere (all -inf) gives zeros, not NaN (so fusing softmax(scores + mask)
into attention changes nothing).

Every comparison checks that the NaN positions match exactly, then the rest
with the suite's tolerances (tests/conftest.py). Rows of 1, 7, 33 and 257
columns (COLS) run both forms of the masked softmax (rows of up to
RLX_ROW_CACHE columns per thread stay in registers). The --rlx-group-size
option of conftest.py runs all of this at a GPU group size too.
"""

from __future__ import annotations

import ctypes
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import TOL
from runtime import background_runs

import rlx

ROOT = Path(__file__).resolve().parents[2]


def _harness_argv(out: Path) -> list[str]:
    """g++ building tests/c/group_threads.cpp as the shared library `out`."""
    cxx = shutil.which("g++")
    assert cxx, "g++ builds rlx's host shim; the group-thread harness needs it too"   # a failure, not a skip
    return [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", f"-I{ROOT / 'shaders'}", "-fno-math-errno",
            "-fno-trapping-math", "-fassociative-math", "-fno-signed-zeros", "-fopenmp-simd", "-Wall", "-Werror",
            "-Wno-unused-function", str(ROOT / "tests/c/group_threads.cpp"), "-o", str(out)]


_HARNESS_DIRS: list[Path] = []


def _harness_path() -> Path:
    if not _HARNESS_DIRS:
        _HARNESS_DIRS.append(Path(tempfile.mkdtemp(prefix="rlx-group-threads-")))
    return _HARNESS_DIRS[0] / "group_threads.so"


# The harness is built once, beside the suite from the end of collection
# (tests/runtime/background_runs.py): the suites that load it carry this mark.
GROUP_THREADS_MARK = background_runs.declare("group-threads harness", lambda: _harness_argv(_harness_path()),
                                             timeout=600)


def group_threads_harness() -> ctypes.CDLL:
    """tests/c/group_threads.cpp's build, waited for, and loaded."""
    ran = background_runs.result("group-threads harness")
    assert ran.returncode == 0, ran.output_tail()
    return ctypes.CDLL(str(_harness_path()))


def remove_group_threads_harness() -> None:
    while _HARNESS_DIRS:
        shutil.rmtree(_HARNESS_DIRS.pop(), ignore_errors=True)

DTYPES = ["f32", "f16"]


def rand(rng, shape, dtype, scale=1.0, offset=0.0):
    """Standard normal data times scale plus offset, in the dtype."""
    return (rng.standard_normal(shape) * scale + offset).astype(np.float16 if dtype == "f16" else np.float32)


def np_dtype(dtype):
    return np.float16 if dtype == "f16" else np.float32


def kernels_of(exe):
    """The kernel of each thunk (None for a gemm)."""
    return [t.kernel for t in exe.thunks]


def packed_qkv_graph(b, t, hq, hkv, d, dtype, **kw):
    """q, k, v as head slices of one packed [B, T, (Hq + 2 Hkv) * D] tensor
    (a fused QKV projection's output): reshape to heads, narrow the heads axis."""
    g = rlx.Graph()
    packed = g.input("qkv", (b, t, (hq + 2 * hkv) * d), dtype)
    heads = g.reshape(packed, (b, t, hq + 2 * hkv, d))
    q = g.narrow(heads, axis=2, start=0, length=hq)
    k = g.narrow(heads, axis=2, start=hq, length=hkv)
    v = g.narrow(heads, axis=2, start=hq + hkv, length=hkv)
    return g, q, k, v


# ---------------------------------------------------------------- NaN semantics

NAN, INF = np.float32(np.nan), np.float32(np.inf)
COLS = [1, 7, 33, 257]
NO_FUSION = {"passes": {"fusion": False}}
FUSION = [pytest.param({}, id="fused"), pytest.param(NO_FUSION, id="unfused")]


def assert_same_nan(got, want, tol, what):
    """NaN positions equal, the rest close (inf equal to inf)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], err_msg=what, **tol)


def check_nan_semantics(g, feed, torch_want, dtype, compile_kw=None, tol=None):
    """Run g, compare its output "y" with torch's result and the numpy reference."""
    got = rlx.compile(g, **(compile_kw or {})).run(feed)["y"]
    tol = tol or TOL[dtype]
    assert_same_nan(got, rlx.run_reference(g, feed)["y"], tol, "against rlx.run_reference")
    if torch_want is not None:   # rounded to the output dtype, as rlx stores it (f16 overflows to inf)
        with np.errstate(over="ignore"):
            assert_same_nan(got, np.asarray(torch_want).astype(got.dtype), tol, "against torch")
    return got


def to_torch(a):
    """A torch tensor in float32 (the f16 data upcast, as the kernels compute)."""
    import torch

    return torch.from_numpy(np.asarray(a, np.float32))


def nan_rows(rng, cols, dtype):
    """Rows of random data, then NaN first / middle / last, two NaNs (the
    first counts), a NaN-only row, +inf and -inf rows, and a mixed row."""
    rows = [rng.standard_normal(cols) * 3]
    for pos in sorted({0, cols // 2, cols - 1}):
        r = rng.standard_normal(cols)
        r[pos] = np.nan
        rows.append(r)
    if cols > 2:
        r = rng.standard_normal(cols)
        r[[1, cols - 1]] = np.nan
        rows.append(r)
    rows += [np.full(cols, np.nan), np.full(cols, np.inf), np.full(cols, -np.inf)]
    r = rng.standard_normal(cols)
    r[0] = np.inf
    r[-1] = -np.inf
    rows.append(r)
    return np.array(rows).astype(np_dtype(dtype))


# ---------------------------------------------------------------- sigmoid / SiLU accuracy

# exp(-|x|) bounds sigmoid's accuracy. On the CPU its reduction is folded
# by -fassociative-math (shaders/prelude/cpu.h): relative error < 1e-6 on
# [-20, 20] and < 4e-6 out to |x| = 80. The old 1 - 1 / (1 + e) form had
# 6e-4 at x = -9 and was -0 from x = -17.
SILU_X = np.concatenate([np.linspace(-80, 20, 4000), np.linspace(-20, 0, 2000)]).astype(np.float32)


def _silu64(x):
    x = x.astype(np.float64)
    return x / (1.0 + np.exp(-x))


def assert_silu_accurate(got, x):
    want = _silu64(x)
    nz = want != 0
    rel = np.abs(got.astype(np.float64)[nz] - want[nz]) / np.abs(want[nz])
    near = np.abs(x[nz]) <= 20
    assert rel[near].max() < 1.5e-6, (rel[near].max(), x[nz][near][rel[near].argmax()])
    assert rel.max() < 5e-6, (rel.max(), x[nz][rel.argmax()])


# ---------------------------------------------------------------- GELU (erf) accuracy in the negative tail

GELU_X = np.concatenate([np.linspace(-12, 6, 3601), np.linspace(-4, 0, 801)]).astype(np.float32)


def assert_gelu_accurate(got, x):
    """Relative error against float64 math.erfc: 0.5 x (1 + erf) from an erf
    of absolute error 1.5e-7 was off by 4% at x = -5 and gave 0 from -6."""
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    nz = np.abs(want) > 1e-37                      # past that f32 holds subnormals (or 0) only
    rel = np.abs(got.astype(np.float64)[nz] - want[nz]) / np.abs(want[nz])
    # Past |x| ~ 8 the exp's argument (z^2 ~ 30-70) rounds in f32; a build without
    # FMA (RLX_PORTABLE_BUILD=1 on x86-64) lands ~2.1e-5 there, with FMA ~1e-5.
    assert rel.max() < 4e-5, (rel.max(), x[nz][rel.argmax()])
    near = np.abs(x[nz]) <= 4
    assert rel[near].max() < 2e-6, (rel[near].max(), x[nz][near][rel[near].argmax()])


def force_gpu_fft_form(monkeypatch, group_rows: int, layout: int = 1) -> None:
    """fft_shared as GPUs run it, forced on whatever device runs the suite:
    up to ``group_rows`` rows a group (as many as fit the group memory),
    a GPU's group-memory slot layout (rlx/lowering/fft.py slot_layout: 1
    XOR-swizzled, Metal's; 2 padded, CUDA's), and the cost model's pick of
    fft_shared wherever it covers N (GPUs pass few long rows on to the
    Stockham passes). The grid's threads stay the device's own, so a
    CPU's one-thread groups run the digit passes
    (tests/ops/test_fft_group_threads.py runs the register form)."""
    from rlx.lowering import fft as fft_lowering
    from rlx.tune.cost import CostModel

    real_grid = fft_lowering.shared_grid

    def grid(target, rows, length, capacity=fft_lowering.SHARED_MAX):
        (_, threads), _ = real_grid(target, rows, length, capacity)
        per = max(1, min(group_rows, capacity // length))
        return ((-(-rows // per), 1, 1), threads), per

    monkeypatch.setattr(fft_lowering, "shared_grid", grid)
    monkeypatch.setattr(fft_lowering, "slot_layout", lambda target: layout)
    monkeypatch.setattr(CostModel, "prefer_fft_shared", lambda self, *a: True)
