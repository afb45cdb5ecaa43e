"""The CUDA decode GEMV's integer form (shaders/quant_pieces.h) on the CPU:
tests/c/quant_pieces_host.cpp compiles its per-format codes, scales, min
terms and chunk dots (RlxQDotPieces on x's int8 pieces, RlxQDotCodes on
x's f32 tile) with host forms of the CUDA intrinsics,
and runs whole rows against x split into int8 pieces here, in the layout
the kernel's rlx_qx_split writes (16-byte units [piece][half][chunk], then
the chunk scales and the f32 sums of each 16 elements).

Checked against the float64 product of gguf's dequantized weights with the
GEMV's bound (1.2e-5 sum |x||w|): every integer-code format, three and five
pieces, weights at every byte alignment (the kernel reads them from a
shared stage that keeps their global alignment), and a planted layout
error that the check must catch. The split itself and the kernel around the
dot (staging, reductions, the fallback) run only on a GPU."""

from __future__ import annotations

import ctypes
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from runtime import background_runs

from .quant_helpers import block_size, dequantize_reference, random_blocks

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]   # the harness's order


# The harness's forms, keyed by their -D defines, each built beside the
# suite from the end of collection (tests/runtime/background_runs.py).
_FORMS = {(): "quant-pieces harness", ("RLX_QDOT_SPLIT_SCALE_OUT=0",): "quant-pieces harness, split scale out 0"}
_DIRS: list[Path] = []


def _out(defines: tuple[str, ...]) -> Path:
    if not _DIRS:
        _DIRS.append(Path(tempfile.mkdtemp(prefix="rlx-quant-pieces-")))
    return _DIRS[0] / f"quant_pieces_host{len(defines)}.so"


def _argv(defines: tuple[str, ...]) -> list[str]:
    cxx = shutil.which("g++")
    assert cxx, "g++ builds rlx's host shim; the quant-pieces harness needs it too"   # a failure, not a skip
    return [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", f"-I{ROOT / 'shaders'}", "-Wall", "-Werror",
            "-Wno-unused-function", "-fopenmp-simd", "-Wno-unknown-pragmas", *(f"-D{d}" for d in defines),
            str(ROOT / "tests/c/quant_pieces_host.cpp"), "-o", str(_out(defines))]


pytestmark = [background_runs.declare(key, lambda defines=defines: _argv(defines), timeout=600)
              for defines, key in _FORMS.items()]


def _build(*defines: str):
    """The harness as a shared library, with -D defines (an experiment switch's other form)."""
    ran = background_runs.result(_FORMS[defines])
    assert ran.returncode == 0, ran.output_tail()
    lib = ctypes.CDLL(str(_out(defines)))
    p, u, i = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
    lib.qph_dot.argtypes = [i, u, p, u, u, p, p, p, p]
    lib.qph_dot.restype = i
    lib.qph_dot_f32.argtypes = [i, p, u, u, u, p, p]
    lib.qph_dot_f32.restype = i
    return lib


@pytest.fixture(scope="module", autouse=True)
def _builds_removed():
    yield
    while _DIRS:
        shutil.rmtree(_DIRS.pop(), ignore_errors=True)


@pytest.fixture(scope="module")
def lib():
    return _build()


@pytest.fixture(scope="module")
def lib_per_weight_scales():
    """RLX_QDOT_SPLIT_SCALE_OUT=0: q3_k and q6_k's f32 dot with each half's
    scale in every weight (shaders/quant_pieces.h; the form before session
    39, kept as an experiment's switch)."""
    return _build("RLX_QDOT_SPLIT_SCALE_OUT=0")


def split_pieces(x: np.ndarray, pieces: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (k,) as the kernel's pieces: per 32-element chunk s = amax / 127,
    p0 = round(x / s), each next piece the rounded remainder times 254.
    Returns (units [pieces, 2, chunks, 16] int8, scale [chunks], sum16 [2 chunks])."""
    chunks = x.size // 32
    xc = x.astype(np.float32).reshape(chunks, 32)
    amax = np.abs(xc).max(axis=1)
    t = xc * np.where(amax > 0, np.float32(127.0) / np.where(amax > 0, amax, 1), 0).astype(np.float32)[:, None]
    units = np.zeros((pieces, 2, chunks, 16), np.int8)
    for p in range(pieces):
        r = np.rint(t)
        units[p] = r.astype(np.int8).reshape(chunks, 2, 16).transpose(1, 0, 2)
        t = ((t - r) * np.float32(254.0)).astype(np.float32)
    sum16 = xc.reshape(chunks, 2, 16).sum(axis=2, dtype=np.float32).reshape(-1)
    return units, (amax / np.float32(127.0)).astype(np.float32), sum16


def _run(lib, fmt, pieces, w_data, n, k, x, align=0, units=None):
    u, scale, sum16 = split_pieces(x, pieces)
    units = u if units is None else units
    row = w_data.reshape(n, -1)
    buf = np.zeros(row.nbytes + 64, np.uint8)   # slack either side: the word reads may pass a run's ends by 3 bytes
    start = 16 + align
    buf[start:start + row.nbytes] = row.reshape(-1)
    y = np.zeros(n, np.float32)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)   # noqa: E731
    rc = lib.qph_dot(FORMATS.index(fmt), pieces, ptr(buf[start:]), n, k, ptr(np.ascontiguousarray(units)),
                     ptr(scale), ptr(sum16), ptr(y))
    assert rc == 0
    return y


def _check(y, x, w):
    want = w.astype(np.float64) @ x.astype(np.float64)
    bound = 1.2e-5 * (np.abs(w) @ np.abs(x.astype(np.float64))) + 1e-30
    ratio = float((np.abs(y - want) / bound).max())
    assert ratio <= 1.0, f"error {ratio:.3g} x the bound"


@pytest.mark.parametrize("pieces", [3, 5])
@pytest.mark.parametrize("fmt", FORMATS)
def test_integer_chunk_dot_matches_float64(lib, rng, fmt, pieces):
    n = 7
    for k in (3 * max(block_size(fmt)[0], 32), 1024):
        w_data = random_blocks(fmt, n, k, rng)
        w = dequantize_reference(fmt, w_data, n, k)
        for align in range(4):
            x = (rng.standard_normal(k) * 0.5).astype(np.float32)
            _check(_run(lib, fmt, pieces, w_data, n, k, x, align), x, w)


@pytest.mark.parametrize("fmt", FORMATS)
def test_five_pieces_keep_small_values_beside_a_spike(lib, rng, fmt):
    """A 3e4 spike a chunk among 1e-3 values: five pieces (the kernel's
    choice for such x) keep the small values within the bound."""
    n, k = 7, 768 if block_size(fmt)[0] == 256 else 640
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    x = (rng.standard_normal(k) * 1e-3).astype(np.float32)
    x[7::32] = 3e4
    _check(_run(lib, fmt, 5, w_data, n, k, x, 1), x, w)


@pytest.mark.parametrize("fmt", ["q4_k", "q6_k", "q8_0"])
def test_a_wrong_piece_layout_fails_the_check(lib, rng, fmt):
    """The check catches x's halves swapped in the pieces' layout."""
    n, k = 7, 768 if fmt != "q8_0" else 640
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    x = (rng.standard_normal(k) * 0.5).astype(np.float32)
    units = split_pieces(x, 3)[0][:, ::-1]
    with pytest.raises(AssertionError):
        _check(_run(lib, fmt, 3, w_data, n, k, x, 0, units), x, w)
    _check(_run(lib, fmt, 3, w_data, n, k, x, 0), x, w)


def _run_f32(lib, fmt, w_data, n, k, x, align=0):
    """RlxQDotCodes over the n rows for x of shape (k,) (the M = 1 form) or
    (m, k) (the M = 8 form); y of shape (n,) or (m, n)."""
    row = w_data.reshape(n, -1)
    buf = np.zeros(row.nbytes + 64, np.uint8)
    start = 16 + align
    buf[start:start + row.nbytes] = row.reshape(-1)
    xs = np.ascontiguousarray(x, np.float32).reshape(-1, k)
    y = np.zeros((xs.shape[0], n), np.float32)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)   # noqa: E731
    assert lib.qph_dot_f32(FORMATS.index(fmt), ptr(buf[start:]), n, k, xs.shape[0], ptr(xs), ptr(y)) == 0
    return y[0] if np.ndim(x) == 1 else y


@pytest.mark.parametrize("fmt", FORMATS)
def test_f32_chunk_dot_from_codes_matches_float64(lib, rng, fmt):
    """RlxQDotCodes (the f32 form's dot: codes made floats through 2^23's
    mantissa) on x at several scales, a spike beside small values and every
    byte alignment of the weights."""
    n = 9
    for k in (3 * max(block_size(fmt)[0], 32), 1024):
        w_data = random_blocks(fmt, n, k, rng)
        w = dequantize_reference(fmt, w_data, n, k)
        for align in range(4):
            x = (rng.standard_normal(k) * 10.0 ** (align - 2)).astype(np.float32)
            if align == 3:
                x[5::32] = 3e4
            _check(_run_f32(lib, fmt, w_data, n, k, x, align), x, w)


@pytest.mark.parametrize("m", [2, 5, 8])
@pytest.mark.parametrize("fmt", FORMATS)
def test_f32_chunk_dot_from_codes_several_rows_of_x(lib, rng, fmt, m):
    """The M = 8 form (gemv_q's, m <= 8 rows of x a dot, each weight formed
    once for every row) against the float64 product, rows of different
    scales in one call."""
    n, k = 7, 2 * max(block_size(fmt)[0], 32)
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    x = (rng.standard_normal((m, k)) * np.logspace(-2, 2, m)[:, None]).astype(np.float32)
    y = _run_f32(lib, fmt, w_data, n, k, x)
    for r in range(m):
        _check(y[r], x[r], w)


def test_f32_chunk_dot_check_catches_a_wrong_code(lib, rng):
    """The check above fails when the codes are off by one byte (x shifted
    by one element against the weights)."""
    n, k = 9, 768
    w_data = random_blocks("q4_k", n, k, rng)
    w = dequantize_reference("q4_k", w_data, n, k)
    x = (rng.standard_normal(k) * 0.5).astype(np.float32)
    with pytest.raises(AssertionError):
        _check(_run_f32(lib, "q4_k", w_data, n, k, np.roll(x, 1)), x, w)


@pytest.mark.parametrize("fmt", FORMATS)
def test_f32_chunk_dot_from_codes_keeps_infinities(lib, rng, fmt):
    """An infinite x element gives +-inf over a non-zero weight and NaN over
    a zero one, as the dequantized product does (a form that applies the
    scales and mins to sums of x would make every zero code a NaN)."""
    n, k = 9, 3 * max(block_size(fmt)[0], 32)
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    x = (rng.standard_normal(k) * 0.5).astype(np.float32)
    x[5] = np.inf
    want = np.where(w[:, 5] > 0, np.inf, np.where(w[:, 5] < 0, -np.inf, np.nan)).astype(np.float32)
    np.testing.assert_array_equal(_run_f32(lib, fmt, w_data, n, k, x), want)


@pytest.mark.parametrize("act, name", [(1, "gelu"), (2, "gelu_tanh"), (3, "silu")])
@pytest.mark.parametrize("k", [32, 77, 640, 2048])
@pytest.mark.parametrize("threads", [1, 3, 256])
def test_gemv_tile_forms_the_glu_of_x(lib, rng, act, name, k, threads):
    """gemv1's x tile staged as glu(gate, up) (the fused down projection of
    rlx/lowering/glu.py on GPUs) equals the glu kernel's values: the
    reference's f32 glu, to f32 rounding, zeros past k, any thread count."""
    from rlx.reference import REFERENCE

    lib.qph_stage_glu.argtypes = [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint,
                                  ctypes.c_void_p]
    lib.qph_stage_glu.restype = ctypes.c_int
    gate = (rng.standard_normal(k) * 3).astype(np.float32)
    up = rng.standard_normal(k).astype(np.float32)
    kp = -(-k // 32) * 32
    x = np.full(kp, np.nan, np.float32)
    assert lib.qph_stage_glu(act, gate.ctypes.data, up.ctypes.data, k, threads, x.ctypes.data) == 0
    want = REFERENCE["glu"]([gate, up], {"activation": name}, None)
    np.testing.assert_allclose(x[:k], want, rtol=2e-6, atol=1e-6)   # atol: gelu tails near 0 (f32 sigmoid)
    assert (x[k:] == 0).all()


@pytest.mark.parametrize("form", ["lib", "lib_per_weight_scales"])
@pytest.mark.parametrize("fmt", ["q3_k", "q6_k"])
def test_f32_chunk_dot_of_the_formats_with_a_scale_a_half(request, rng, fmt, form):
    """The formats with a scale a half and no min, in both of
    RLX_QDOT_SPLIT_SCALE_OUT's forms (each half's scale out of its sum, the
    default; or in every weight): one and several rows of x against the
    float64 product, every byte alignment, and an infinite x as the
    dequantized product has it."""
    lib = request.getfixturevalue(form)
    n, k = 9, 768
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    for align in range(4):
        x = (rng.standard_normal(k) * 10.0 ** (align - 2)).astype(np.float32)
        _check(_run_f32(lib, fmt, w_data, n, k, x, align), x, w)
    x = (rng.standard_normal((5, k)) * np.logspace(-2, 2, 5)[:, None]).astype(np.float32)
    y = _run_f32(lib, fmt, w_data, n, k, x)
    for r in range(5):
        _check(y[r], x[r], w)
    x = (rng.standard_normal(k) * 0.5).astype(np.float32)
    x[5] = np.inf
    want = np.where(w[:, 5] > 0, np.inf, np.where(w[:, 5] < 0, -np.inf, np.nan)).astype(np.float32)
    np.testing.assert_array_equal(_run_f32(lib, fmt, w_data, n, k, x), want)
