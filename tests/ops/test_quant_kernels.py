"""The GGUF block-format kernels of shaders/quant.h, run straight on the shim
(no graph compiler): dequantize_<fmt>_<t>, gemv_<fmt>_<t> and
gather_<fmt>_<t>, for every format of quant_helpers.FORMATS and t = f32, f16,
against the gguf package's dequantization (quant_helpers.dequantize_reference).

The device is the suite's --rlx-device (cpu by default: the host shim; e.g.
--rlx-device cuda); a backend whose shim is not usable here skips.

Exactness: dequantize and gather in f32 equal gguf bit for bit (every
decoder product is exact in f32, shaders/quant.h says why); in f16 they equal
gguf's f32 value rounded to f16.

GEMV tolerance, against the float64 product of the dequantized weights with
the same (f32 or f16) inputs: before the activation
|err| <= 1e-5 * sum_kk |x[r, kk]| |W[j, kk]| (f32 accumulation over k <= 768
terms in chunks of 32: the worst-case bound is ~(32 + k / 32) * 2^-24 of that
sum, ~3.5e-6); the activation (Lipschitz constant <= 1.13 for GELU, SiLU,
ReLU) scales that by 1.2 and adds its own relative error (2e-6 |y|); an f16
output adds half an f16 ulp (2^-11 |y|, or 2^-25 below the normal range).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.errors import RlxError
from rlx.ir.dtype import to_bf16
from rlx.lowering.quant import gemv_params
from rlx.runtime import shim
from rlx.runtime.shim import CommandBuffer

from .quant_helpers import FORMATS, block_size, dequantize_reference, random_blocks

DTYPES = {"f32": np.float32, "f16": np.float16}
ACT_NONE, ACT_GELU, ACT_GELU_TANH, ACT_SILU, ACT_RELU = range(5)
_BACKEND = {"cpu": "host", "host": "host", "cuda": "cuda", "metal": "metal"}


@pytest.fixture(scope="module")
def qdev(request):
    """(device, built-in library) of --rlx-device, or a skip."""
    name = request.config.getoption("--rlx-device")
    base, _, index = name.partition(":")
    backend = _BACKEND.get(base, base)
    status = shim.shim_status().get(backend)
    if status is None or not status["loaded"] or status["reason"] is not None:
        pytest.skip(f"{backend} shim not usable here: {status and status['reason']}")
    device = shim.open_device(backend, int(index or 0))
    return device, device.builtin_library()


def _upload(device, array: np.ndarray):
    array = np.ascontiguousarray(array)
    buf = device.alloc(max(array.nbytes, 16))
    buf.write(0, array)
    return buf


def _run(qdev, name: str, arrays, params: bytes, out_index: int, out_count: int, out_dtype, groups, threads):
    """Binds arrays (numpy arrays; None for the output) then params, dispatches, returns the output."""
    device, lib = qdev
    out = device.alloc(max(out_count * np.dtype(out_dtype).itemsize, 16))
    # never-written outputs show up (integer outputs: all ones, bf16's NaN bits)
    fill = np.nan if np.dtype(out_dtype).kind == "f" else np.iinfo(out_dtype).max
    out.write(0, np.full(out_count, fill, out_dtype))
    bufs = [out if a is None else _upload(device, a) for a in arrays]
    with CommandBuffer(device) as cb:
        cb.set_pipeline(lib.pipeline(name))
        for i, b in enumerate(bufs):
            cb.set_buffer(i, b)
        cb.set_bytes(len(bufs), params)
        cb.dispatch((groups, 1, 1), (threads, 1, 1))
        cb.commit_wait()
    return np.frombuffer(out.read(0, out_count * np.dtype(out_dtype).itemsize), out_dtype).copy()


def _ks(fmt: str) -> list[int]:
    elems, _ = block_size(fmt)
    ks = {elems, 3 * elems}
    if 768 % elems == 0:
        ks.add(768)
    return sorted(ks)


def _assert_exact(got, want, what):
    """Bit-for-bit (NaN never expected; -0 and 0 compare equal only as values)."""
    assert got.shape == want.shape, what
    bad = got.view(np.uint32 if got.dtype == np.float32 else np.uint16) != \
        want.view(np.uint32 if want.dtype == np.float32 else np.uint16)
    bad &= ~((got == 0) & (want == 0))
    if bad.any():
        i = np.flatnonzero(bad.ravel())[:8]
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} differ, e.g. at {i.tolist()}: "
                             f"got {got.ravel()[i].tolist()} want {want.ravel()[i].tolist()}")


# ---- dequantize ------------------------------------------------------------------
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_matches_gguf(qdev, fmt, dt):
    rng = np.random.default_rng(abs(hash((fmt, dt))) % 2**32)
    for rows in (1, 3, 7):
        for k in _ks(fmt):
            data = random_blocks(fmt, rows, k, rng)
            want = dequantize_reference(fmt, data, rows, k).astype(DTYPES[dt])
            n = rows * k
            for groups, threads in ((1, 1), (3, 32), (64, 64)):
                params = np.array([n, 0, 0, 0], np.uint32).tobytes()
                got = _run(qdev, f"dequantize_{fmt}_{dt}", [data, None], params, 1, n, DTYPES[dt], groups, threads)
                _assert_exact(got.reshape(rows, k), want, f"{fmt} {dt} rows={rows} k={k} grid={groups}x{threads}")


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "bf16"])
def test_dequantize_to_bf16_tiles_on_the_host(request, qdev, fmt):
    """dequantize_<fmt>_bf16 (the host's prefill tiles under precision="bf16"):
    the oracle's values rounded to nearest even bf16 (rlx.ir.dtype.to_bf16),
    bit for bit, over odd row counts and several k. The other targets have
    no such kernel (the tiles are the host gemm's bf16 B): asking for it
    there is a clear error."""
    base = request.config.getoption("--rlx-device").partition(":")[0]
    if _BACKEND.get(base, base) != "host":
        with pytest.raises(RlxError, match=f"dequantize_{fmt}_bf16"):
            qdev[1].pipeline(f"dequantize_{fmt}_bf16")
        return
    rng = np.random.default_rng(abs(hash((fmt, "bf16 tiles"))) % 2**32)
    for rows in (1, 3):
        for k in _ks(fmt):
            data = random_blocks(fmt, rows, k, rng)
            want = to_bf16(dequantize_reference(fmt, data, rows, k).astype(np.float32))
            n = rows * k
            params = np.array([n, 0, 0, 0], np.uint32).tobytes()
            got = _run(qdev, f"dequantize_{fmt}_bf16", [data, None], params, 1, n, np.uint16, 3, 1)
            np.testing.assert_array_equal(got.reshape(rows, k), want, f"{fmt} rows={rows} k={k}")


# ---- gather ----------------------------------------------------------------------
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_gather_matches_gguf_rows(qdev, fmt, dt):
    rng = np.random.default_rng(abs(hash((fmt, dt, "gather"))) % 2**32)
    rows = 5
    idx = np.array([3, 0, 7, -2, 4, 1, 4], np.int64)   # 7 and -2 clamp to 4 and 0
    for dim in _ks(fmt):
        table = random_blocks(fmt, rows, dim, rng)
        want = dequantize_reference(fmt, table, rows, dim)[np.clip(idx, 0, rows - 1)].astype(DTYPES[dt])
        for is_i64 in (0, 1):
            indices = idx if is_i64 else idx.astype(np.int32)
            params = np.array([len(idx), dim, rows, is_i64], np.uint32).tobytes()
            got = _run(qdev, f"gather_{fmt}_{dt}", [table, indices, None], params, 2, len(idx) * dim, DTYPES[dt],
                       3, 32)
            _assert_exact(got.reshape(len(idx), dim), want, f"{fmt} {dt} dim={dim} i64={is_i64}")


# ---- GEMV ------------------------------------------------------------------------
def _act_ref(act: int, v: np.ndarray) -> np.ndarray:
    if act == ACT_GELU:
        erf = np.vectorize(math.erf)
        return 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)))
    if act == ACT_GELU_TANH:
        return 0.5 * v * (1.0 + np.tanh(0.79788456080286536 * (v + 0.044715 * v ** 3)))
    if act == ACT_SILU:
        return v / (1.0 + np.exp(np.minimum(-v, 700.0)))
    if act == ACT_RELU:
        return np.maximum(v, 0.0)
    return v


def _gemv_case(qdev, fmt, dt, w_data, w, m, n, k, rpg, threads, has_bias, act, rng, kernel="gemv", x=None):
    """Runs one gemv and checks it; returns the worst error relative to its
    bound. x: the m rows of x ([m, k + 3], padded), else standard normal / 2."""
    npdt = DTYPES[dt]
    x_stride, y_stride = k + 3, n + 2                      # padded rows: the strides are honoured
    x = (rng.standard_normal((m, x_stride)) * 0.5 if x is None else x).astype(npdt)
    bias = (rng.standard_normal(n) * 0.5).astype(npdt)
    x64, w64 = x[:, :k].astype(np.float64), w.astype(np.float64)
    pre = x64 @ w64.T + (bias.astype(np.float64) if has_bias else 0.0)
    want = _act_ref(act, pre)
    bound = 1e-5 * (np.abs(x64) @ np.abs(w64).T) * 1.2 + 2e-6 * np.abs(want) + 1e-30
    if dt == "f16":
        bound = bound + np.maximum(np.abs(want) * 2.0 ** -11, 2.0 ** -25)
    groups = -(-n // rpg)
    params = gemv_params(m, n, k, x_stride, y_stride, rpg, has_bias, act)
    bias_arg = bias if has_bias else np.zeros(4, npdt)     # any buffer when unused
    got = _run(qdev, f"{kernel}_{fmt}_{dt}", [x, w_data, None, bias_arg], params, 2, m * y_stride, npdt, groups,
               threads)
    got = got.reshape(m, y_stride)
    assert np.isnan(got[:, n:]).all(), "gemv wrote past n in a padded row"
    err = np.abs(got[:, :n].astype(np.float64) - want)
    ratio = float((err / bound).max())
    assert ratio <= 1.0, (f"{fmt} {dt} m={m} n={n} k={k} rpg={rpg} threads={threads} bias={has_bias} act={act}: "
                          f"error {err.max():.3g} is {ratio:.3g} x the bound")
    return ratio


@pytest.mark.parametrize("kernel", ["gemv", "gemv1"])
@pytest.mark.parametrize("threads", [1, 32, 256])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_gemv_matches_float64_product(qdev, fmt, dt, threads, kernel):
    """gemv_<fmt> for every m <= 8; gemv1_<fmt> (the decode step's kernel,
    for m = 1) computes larger m too, an x row at a time."""
    rng = np.random.default_rng(abs(hash((fmt, dt, threads, kernel))) % 2**32)
    elems, _ = block_size(fmt)
    n = 7
    ks = sorted({3 * elems, 768 if 768 % elems == 0 else 3 * elems} | ({37} if elems == 1 else set()))
    acts = [ACT_GELU, ACT_SILU, ACT_GELU_TANH, ACT_RELU]
    for k in ks:
        w_data = random_blocks(fmt, n, k, rng)
        w = dequantize_reference(fmt, w_data, n, k)
        for mi, m in enumerate((1, 2, 5, 8)):
            for rpg in (1, 4):
                _gemv_case(qdev, fmt, dt, w_data, w, m, n, k, rpg, threads, 0, ACT_NONE, rng, kernel)
                _gemv_case(qdev, fmt, dt, w_data, w, m, n, k, rpg, threads, 1, acts[(mi + rpg) % 4], rng, kernel)


@pytest.mark.parametrize("threads", [32, 256])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_gemv_long_rows(qdev, fmt, dt, threads):
    """K = 3072: one row of x fits the GPU kernel's shared tile (x staged
    once per group), three or eight rows do not (x staged a pass at a time)."""
    rng = np.random.default_rng(abs(hash((fmt, dt, threads, "long"))) % 2**32)
    n, k = 5, 3072 + (37 if block_size(fmt)[0] == 1 else 0)
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    for m in (1, 3, 8):
        _gemv_case(qdev, fmt, dt, w_data, w, m, n, k, 3, threads, 1, ACT_NONE, rng)
    _gemv_case(qdev, fmt, dt, w_data, w, 1, n, k, 3, threads, 1, ACT_NONE, rng, "gemv1")


INTEGER_X_FORMATS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]


@pytest.mark.parametrize("threads", [32, 48, 256])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", INTEGER_X_FORMATS)
def test_gemv1_direct_rows(qdev, fmt, dt, threads):
    """gemv1 over rows of >= 32 chunks in formats with int8 codes: on CUDA a
    SIMD group a weight row, lanes on strided chunks read straight from the
    weight (shaders/quant_gemv.h, RLX_QGEMV_DIRECT_CHUNKS). Odd row counts,
    groups whose rows do not divide among the SIMD groups, 48 threads (a
    half SIMD group keeps the staged passes beside full ones), k of 32 and
    of 33+ chunks (a lane with one more chunk than others), bias and
    activations; every target computes the same values."""
    rng = np.random.default_rng(abs(hash((fmt, dt, threads, "direct"))) % 2**32)
    elems, _ = block_size(fmt)
    for k in sorted({1024, 1280 if elems == 256 else 1056, 2304}):
        n = 37
        w_data = random_blocks(fmt, n, k, rng)
        w = dequantize_reference(fmt, w_data, n, k)
        for rpg, has_bias, act in ((16, 0, ACT_NONE), (5, 1, ACT_SILU), (37, 1, ACT_GELU)):
            _gemv_case(qdev, fmt, dt, w_data, w, 1, n, k, rpg, threads, has_bias, act, rng, "gemv1")


@pytest.mark.parametrize("threads", [48, 256])
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", INTEGER_X_FORMATS)
def test_gemv1i_of_x_as_integer_pieces(qdev, fmt, dt, threads):
    """On CUDA gemv1i (gemv1's integer form) multiplies these formats' codes with x split into int8
    pieces per 32 elements (shaders/quant_pieces.h): three where every chunk
    is narrow, five where one is wide (a spike beside small values), and
    the f32 form where the pieces do not fit their 16 KiB of shared memory
    (wide x at k = 4096, any x at 6400 and 8192), where x has a chunk under 1e-30, where
    the group is not whole SIMD groups (48 threads) or has under 32 rows
    (the second group of each dispatch here). Each case is one of those
    branches there; every device must give the same product."""
    rng = np.random.default_rng(abs(hash((fmt, dt, threads, "pieces"))) % 2**32)
    n = 45
    spike = 3e4 if dt == "f32" else 1.0   # f16: sums of 256 spiky products under its 65504
    for k in (640 if block_size(fmt)[0] == 32 else 768, 4096, 6400, 8192):
        w_data = random_blocks(fmt, n, k, rng)
        w = dequantize_reference(fmt, w_data, n, k)
        plain = rng.standard_normal((1, k + 3)) * 0.5
        spiky = rng.standard_normal((1, k + 3)) * 1e-3
        spiky[0, 5::32] = spike                               # one spike a chunk
        tiny = plain.copy()
        tiny[0, 64:96] *= 1e-36 if dt == "f32" else 0.0       # one chunk under 1e-30 (f16: zeros)
        for x in (plain, spiky, tiny):
            _gemv_case(qdev, fmt, dt, w_data, w, 1, n, k, 32, threads, 1, ACT_NONE, rng, "gemv1i", x)


def test_gemv_rows_per_group_past_n_and_many_rows(qdev):
    """A group count that overshoots n writes nothing extra; rows_per_group > n."""
    rng = np.random.default_rng(5)
    fmt, dt, n, k = "q4_k", "f32", 5, 512
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    _gemv_case(qdev, fmt, dt, w_data, w, 3, n, k, 8, 32, 1, ACT_NONE, rng)


def test_a_wrong_scale_fails_the_checks(qdev):
    """The checks catch a decoder off by one scale step: the blocks with one
    q4_k sub-block scale bumped no longer match the kernel's output."""
    rng = np.random.default_rng(11)
    fmt, rows, k = "q4_k", 2, 512
    data = random_blocks(fmt, rows, k, rng)
    params = np.array([rows * k, 0, 0, 0], np.uint32).tobytes()
    got = _run(qdev, f"dequantize_{fmt}_f32", [data, None], params, 1, rows * k, np.float32, 2, 32)
    planted = data.copy()
    planted[0, 4] ^= 1                                      # scale of sub-block 0, block 0
    with pytest.raises(AssertionError):
        _assert_exact(got.reshape(rows, k), dequantize_reference(fmt, planted, rows, k), "planted")
    _assert_exact(got.reshape(rows, k), dequantize_reference(fmt, data, rows, k), "unplanted")


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("fmt", INTEGER_X_FORMATS)
def test_gemv_of_hard_x(qdev, fmt, dt):
    """gemv_<fmt> where the CPU's integer forms split x into pieces
    (csrc/host_quant_vnni.h for the K-quants, csrc/host_quant_q5_0_avx2.h and
    _avx512.h for q5_0, csrc/host_quant_arm64.h on ARM64): x with an outlier in
    every block that the pieces still take (20 times the rest), a spike over
    small values (the K-quants send the dispatch to the f32 form; q5_0 on
    x86 keeps the spike apart in f32), a spike the size of its block's other
    values together (where the rest's products are half the bound's sum, so
    a dropped or misscaled rest fails), two such spikes a block (the f32
    form everywhere), a block of zeros, a block under 1e-30, a one-hot row,
    and rows of different scales in one dispatch. Every case against the
    same float64 bound.
    Rows of 32-element blocks come in three lengths: the AVX-512 q5_0 form
    takes blocks four at a time, then a pair, then a lone block."""
    for k in (640, 672, 704) if block_size(fmt)[0] == 32 else (768,):
        _hard_x_case(qdev, fmt, dt, k)


def _hard_x_case(qdev, fmt, dt, k):
    rng = np.random.default_rng(abs(hash((fmt, dt, k, "hard x"))) % 2**32)
    n = 19
    w_data = random_blocks(fmt, n, k, rng)
    w = dequantize_reference(fmt, w_data, n, k)
    big = 3e4 if dt == "f32" else 1.0
    plain = rng.standard_normal((3, k + 3)) * 0.5
    outlier = plain.copy()
    outlier[:, 7::32] = 10.0                                    # ~20x the block's typical |x|
    spiky = rng.standard_normal((3, k + 3)) * 1e-3
    spiky[:, 5::32] = big
    lone = plain.copy()
    lone[:, 9::32] = 12.0                                       # ~ the sum of the block's other |x|
    twin = plain * 0.1
    twin[:, 9::32], twin[:, 10::32] = 4.0, -4.0                 # wide without either one
    holes = plain.copy()
    holes[:, 32:64] = 0.0
    holes[1, 96:128] *= 1e-36 if dt == "f32" else 0.0
    one_hot = np.zeros((3, k + 3))
    one_hot[0, 100], one_hot[1, 3], one_hot[2, k - 1] = 1.0, -2.0, 0.5
    scales = plain * np.array([[1e-3], [1.0], [1e3 if dt == "f32" else 4.0]])   # f16: y under 65504
    for name, x in (("plain", plain), ("outlier", outlier), ("spiky", spiky), ("lone", lone), ("twin", twin),
                    ("holes", holes),
                    ("one_hot", one_hot), ("scales", scales)):
        for m in (1, 3):
            try:
                _gemv_case(qdev, fmt, dt, w_data, w, m, n, k, 4, 32, 1, ACT_NONE, rng, "gemv", x[:m])
            except AssertionError as e:
                raise AssertionError(f"x {name}, k={k}: {e}") from None
