"""fft_shared's register form (shaders/fft.h: a row's elements in T threads'
registers across Stockham passes, taken where a group has exactly
rlx/lowering/fft.py register_threads(N) threads a row) run on the CPU
with real threads: tests/c/group_threads.cpp's harness (G pthreads a
group sharing group memory, meeting at barriers). The host device runs
one-thread groups, which take the digit passes, so this is where the
register form executes before a GPU runs it.

Checked against numpy (float64), with the FFT suite's bound
(tests/ops/test_fft.py: 1e-5 log2 N times the row's 2-norm): every length
from 32 to 4096, both GPU slot layouts (2 padded: CUDA's; 1 XOR-swizzled:
Metal's), forward and inverse, a last group holding fewer rows, sources
and destinations that go through group memory (real input, a strided
destination, the real part with a scale, rfft's unpacked bins), the grid
the lowering picks for a GPU, a thread count that does not match (the
digit passes, with the same threads). Also the GPUs'
mixed-radix form (N = 2^a 3^b 5^c: Stockham passes of radix 2 to 5 and 8
between the halves of group memory, the first reading the source and the
last writing the destination where there are two passes or more), as
fft_mixed runs it, at several thread counts, in place, staged,
unpacking rfft's bins and reading the windowed frames of padded signals
(the log-mel front end's source). A race that does not fire in a
run is not caught; GPUs stay unverified here (benchmarks/gpu runs the
suites on CUDA)."""

from __future__ import annotations

import ctypes
import math
import struct
from types import SimpleNamespace

import numpy as np
import pytest

from rlx.lowering.fft import (
    MIXED_SHARED_MAX,
    SHARED_MAX,
    SLOTS_PADDED,
    SLOTS_SWIZZLED,
    STORE_RFFT,
    STORE_RFFT_POWER,
    bluestein_spectrum,
    chirp,
    mixed_span,
    register_threads,
    shared_grid,
    transform_passes,
    twiddles,
)

from .helpers import GROUP_THREADS_MARK
from .test_splat_group_threads import _ptr

pytestmark = GROUP_THREADS_MARK   # the harness builds beside the suite

LENGTHS = [32, 64, 128, 256, 512, 1024, 2048, 4096]
LAYOUTS = [SLOTS_PADDED, SLOTS_SWIZZLED]

# FftParams (shaders/fft.h) field order; `scale` is the one float.
_FIELDS = ("n rows radix span inverse load_mode src_offset src_row src_step src_len herm_n src_avail pre_mul "
           "store_mode dst_offset dst_row dst_step dst_count post_mul scale group_rows swizzle passes limit "
           "src_rpb src_block dst_rpb dst_block src_pad src_valid src_reflect pad1").split()


def _params(**fields) -> np.ndarray:
    values = [fields.get(name, 0) for name in _FIELDS]
    raw = struct.pack("<19If12I", *values[:19], float(values[19]), *values[20:])
    return np.frombuffer(raw, np.uint8).copy()


def _declare(harness: ctypes.CDLL) -> ctypes.CDLL:
    harness.gt_fft_shared.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_uint] * 2
    harness.gt_fft_shared.restype = ctypes.c_int
    harness.gt_fft_mixed.argtypes = harness.gt_fft_shared.argtypes
    harness.gt_fft_mixed.restype = None
    return harness


@pytest.fixture(scope="module")
def gt(group_threads_lib):
    return _declare(group_threads_lib)


def _run(gt, src, dst, n, rows, group_rows, threads, layout, inverse=0, post=None, pre=None,
         kernel="fft_shared", **fields) -> bool:
    tw = twiddles(n)
    post = tw if post is None else post
    pre = tw if pre is None else pre
    p = _params(**{"n": n, "rows": rows, "span": n.bit_length() - 1, "inverse": inverse, "src_len": n,
                   "src_row": 2 * n, "src_step": 2, "dst_count": n, "dst_row": 2 * n, "dst_step": 2, "scale": 1.0,
                   "group_rows": group_rows, "swizzle": layout, **fields})
    groups = -(-rows // group_rows)
    return bool(getattr(gt, f"gt_{kernel}")(_ptr(src), _ptr(dst), _ptr(tw), _ptr(pre), _ptr(post), _ptr(p), groups,
                                            threads))


def _assert_close(got, want, x, n, scale=1.0):
    err = np.abs(got.astype(np.complex128) - want).max(axis=-1)
    bound = 1e-5 * math.log2(n) * np.linalg.norm(x, axis=-1) * scale
    assert (err <= bound).all(), f"error {err.max():.3g} > bound {bound.min():.3g}"


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def _complex_rows(rng, rows, n):
    return (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(np.complex64)


def _group_rows(n):
    return 1 if n == SHARED_MAX else 2   # with rows = 2 * group_rows + 1: a last group of one row


def _check_both_directions(gt, x, n, group_rows, threads, layout, register_form, **fields):
    """Forward and unscaled inverse of x's rows against numpy, and whether
    the kernel took the register form."""
    rows = x.shape[0]
    for inverse in (0, 1):
        y = np.full((rows, n), np.nan, np.complex64)
        assert _run(gt, x, y, n, rows, group_rows, threads, layout, inverse=inverse, **fields) == register_form
        want = np.fft.ifft(x.astype(np.complex128)) * n if inverse else np.fft.fft(x.astype(np.complex128))
        _assert_close(y, want, x, n)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", LENGTHS)
def test_register_form_plain_rows(gt, rng, n, layout):
    gr = _group_rows(n)
    _check_both_directions(gt, _complex_rows(rng, 2 * gr + 1, n), n, gr, gr * register_threads(n), layout, True)


@pytest.mark.parametrize("n", [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 100])
def test_register_twiddles_follow_the_passes(n):
    """twiddles(n) is the natural table, then the register form's: for each
    pass after the first (span S = P, then P^2 in three passes; radix R the
    rest of log2 N), W_{S R}^{k r} at r S + k, in float64 rounded once."""
    table = twiddles(n)
    natural = np.exp(-2j * np.pi * np.arange(n) / n)
    np.testing.assert_array_equal(table[:n, 0] + 1j * table[:n, 1], natural.astype(np.complex64))
    threads = register_threads(n)
    if not threads:
        assert table.shape == (n, 2)
        return
    bits, per = n.bit_length() - 1, (n // threads).bit_length() - 1
    radices = [1 << per] * (bits // per) + ([1 << (bits % per)] if bits % per else [])
    at, span = n, radices[0]
    for radix in radices[1:]:
        block = table[at: at + span * radix]
        got = (block[:, 0] + 1j * block[:, 1]).reshape(radix, span)
        k, r = np.meshgrid(np.arange(span), np.arange(radix))
        np.testing.assert_array_equal(got, np.exp(-2j * np.pi * (k * r) / (span * radix)).astype(np.complex64))
        at, span = at + span * radix, span * radix
    assert at == table.shape[0]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [32, 128, 512, 4096])
def test_register_form_staged_source_and_destination(gt, rng, n, layout):
    """A real source (load mode 1: staged through group memory) into every
    other complex slot of the destination (dst_step 4: stored from group
    memory), and a complex source to the real part only, scaled."""
    gr = _group_rows(n)
    rows, threads = 2 * gr + 1, gr * register_threads(n)
    xr = rng.standard_normal((rows, n)).astype(np.float32)
    y = np.zeros((rows, 2 * n), np.complex64)
    assert _run(gt, xr, y, n, rows, gr, threads, layout, load_mode=1, src_row=n, src_step=1,
                dst_row=4 * n, dst_step=4)
    _assert_close(y[:, ::2], np.fft.fft(xr.astype(np.float64)), xr, n)
    assert not y[:, 1::2].any()
    x = _complex_rows(rng, rows, n)
    yr = np.zeros((rows, n), np.float32)
    assert _run(gt, x, yr, n, rows, gr, threads, layout, store_mode=1, dst_row=n, dst_step=1, scale=0.5,
                inverse=1)
    _assert_close(yr, (np.fft.ifft(x.astype(np.complex128)) * n * 0.5).real, x, n, 0.5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m", [32, 256, 2048])
def test_register_form_rfft_unpacked_in_the_store(gt, rng, m, layout):
    """rfft of 2m as the length-m transform of the packed signal, its m + 1
    bins unpacked by the store (store mode 2, post: the length-2m twiddles)."""
    gr = _group_rows(m)
    rows = 2 * gr + 1
    x = rng.standard_normal((rows, 2 * m)).astype(np.float32)
    y = np.zeros((rows, m + 1), np.complex64)
    assert _run(gt, x, y, m, rows, gr, gr * register_threads(m), layout, post=twiddles(2 * m),
                store_mode=STORE_RFFT, dst_row=2 * (m + 1), dst_count=m + 1)
    _assert_close(y, np.fft.rfft(x.astype(np.float64)), x, 2 * m)
    power = np.zeros((rows, m + 1), np.float32)   # store mode 3: the bins' power, scaled first
    assert _run(gt, x, power, m, rows, gr, gr * register_threads(m), layout, post=twiddles(2 * m),
                store_mode=STORE_RFFT_POWER, dst_row=m + 1, dst_step=1, dst_count=m + 1, scale=0.5)
    _assert_power_close(power, np.fft.rfft(x.astype(np.float64)) * 0.5, x, 2 * m, 0.5)


def _assert_power_close(got, spec, x, n, scale=1.0):
    """got against |spec|^2 within the FFT bound of spec times twice its
    bins' magnitudes (|a|^2 - |b|^2 = (|a| - |b|)(|a| + |b|))."""
    fft_bound = 1e-5 * math.log2(n) * np.linalg.norm(x, axis=-1)[:, None] * scale
    err = np.abs(got.astype(np.float64) - np.abs(spec) ** 2)
    assert (err <= fft_bound * (2 * np.abs(spec) + fft_bound)).all(), f"power error {err.max():.3g}"


@pytest.mark.parametrize("n", [64, 1024])
def test_gpu_grid_takes_the_register_form(gt, rng, n):
    """The lowering's grid for a CUDA-like GPU of few compute units has
    exactly register_threads(n) threads a row, which the kernel's test
    accepts."""
    gpu = SimpleNamespace(one_thread_groups=False, compute_units=2, simd_width=32, max_threads_per_group=1024)
    rows = 9
    ((groups, _, _), (threads, _, _)), gr = shared_grid(gpu, rows, n)
    assert threads == gr * register_threads(n) and groups == -(-rows // gr)
    x = _complex_rows(rng, rows, n)
    y = np.zeros_like(x)
    assert _run(gt, x, y, n, rows, gr, threads, SLOTS_PADDED)
    _assert_close(y, np.fft.fft(x.astype(np.complex128)), x, n)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n,threads", [(1024, 64), (256, 33), (4096, 128)])
def test_other_thread_counts_take_the_digit_passes(gt, rng, n, threads, layout):
    gr = _group_rows(n)
    rows = 2 * gr + 1
    x = _complex_rows(rng, rows, n)
    y = np.zeros_like(x)
    assert not _run(gt, x, y, n, rows, gr, threads, layout)
    _assert_close(y, np.fft.fft(x.astype(np.complex128)), x, n)


@pytest.mark.parametrize("n", [32, 256, 4096])
def test_register_form_inverse_of_real_rows(gt, rng, n):
    """The inverse of real rows to their real parts (staged both ways) in
    the conjugate form: the conjugate of a real source is itself."""
    gr = _group_rows(n)
    rows, threads = 2 * gr + 1, gr * register_threads(n)
    xr = rng.standard_normal((rows, n)).astype(np.float32)
    yr = np.zeros((rows, n), np.float32)
    assert _run(gt, xr, yr, n, rows, gr, threads, SLOTS_SWIZZLED, inverse=1, load_mode=1, src_row=n,
                src_step=1, store_mode=1, dst_row=n, dst_step=1)
    _assert_close(yr, (np.fft.ifft(xr.astype(np.float64)) * n).real, xr, n)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n1,n2", [(128, 64), (128, 128)])
def test_register_form_runs_the_four_step(gt, rng, n1, n2, layout):
    """rlx/lowering/fft.py _four_step's two dispatches (RLX_FFT_GPU_FOUR_STEP
    on GPUs): the n2 columns of each row (rows in blocks, adjacent columns
    adjacent: loads and stores with the rows fastest), each output twiddled
    (post_mul 2, conjugated for the inverse), then the n1 rows, written as
    columns of the result."""
    n, rows, gr = n1 * n2, 3, 2
    x = _complex_rows(rng, rows, n)
    k1, j2 = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    grid = _pairs(np.exp(-2j * np.pi * k1 * j2 / n))
    for inverse in (0, 1):
        y = np.zeros_like(x)
        out = np.zeros_like(x)
        assert _run(gt, x, y, n1, rows * n2, gr, gr * register_threads(n1), layout, inverse=inverse, post=grid,
                    src_row=2, src_step=2 * n2, src_rpb=n2, src_block=2 * n,
                    dst_row=2, dst_step=2 * n2, dst_rpb=n2, dst_block=2 * n, post_mul=2)
        assert _run(gt, y, out, n2, rows * n1, gr, gr * register_threads(n2), layout, inverse=inverse,
                    src_row=2 * n2, dst_row=2, dst_step=2 * n1, dst_rpb=n1, dst_block=2 * n)
        want = np.fft.ifft(x.astype(np.complex128)) * n if inverse else np.fft.fft(x.astype(np.complex128))
        _assert_close(out, want, x, n)



@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [2053, 2500])
def test_register_form_runs_bluesteins_four_steps(gt, rng, n, layout):
    """rlx/lowering/fft.py _bluestein_four_step's four dispatches (L = 8192 =
    128 x 64): the first load multiplies by the chirp and reads zeros past
    the row's n elements (pre_mul 3), the forward store multiplies by the
    convolution's spectrum, the inverse's by the chirp, keeping the first
    n outputs (post_mul 3)."""
    length, n1, n2, rows, gr = 8192, 128, 64, 3, 2
    k1, j2 = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    grid = _pairs(np.exp(-2j * np.pi * k1 * j2 / length))
    x = _complex_rows(rng, rows, n)
    for inverse in (0, 1):
        w, spectrum = _pairs(chirp(n, bool(inverse))), _pairs(bluestein_spectrum(n, length, bool(inverse)))
        cols = dict(src_row=2, src_step=2 * n2, src_rpb=n2, dst_row=2, dst_step=2 * n2, dst_rpb=n2,
                    dst_block=2 * length, post_mul=2)
        by_rows = dict(src_row=2 * n2, dst_row=2, dst_step=2 * n1, dst_rpb=n1, post_mul=3)
        a, b = (np.zeros((rows, length), np.complex64) for _ in range(2))
        y = np.full((rows, n), np.nan, np.complex64)
        t1, t2 = gr * register_threads(n1), gr * register_threads(n2)   # all four take the register form
        assert _run(gt, x, a, n1, rows * n2, gr, t1, layout, post=grid, pre=w, src_block=2 * n, pre_mul=3, limit=n,
                    **cols)
        assert _run(gt, a, b, n2, rows * n1, gr, t2, layout, post=spectrum, dst_block=2 * length, limit=length,
                    **by_rows)
        assert _run(gt, b, a, n1, rows * n2, gr, t1, layout, inverse=1, post=grid, src_block=2 * length, **cols)
        assert _run(gt, a, y, n2, rows * n1, gr, t2, layout, inverse=1, post=w, dst_block=2 * n, limit=n, **by_rows)
        want = np.fft.ifft(x.astype(np.complex128)) * n if inverse else np.fft.fft(x.astype(np.complex128))
        _assert_close(y, want, x, n)


MIXED_LENGTHS = [3, 5, 6, 12, 15, 24, 100, 200, 400, 1000, 1536, 2000]   # 8 x 3, 8 x 8 x 8 x 3: radix-8 passes


def _mixed_form(n: int) -> dict:
    """FftParams of fft_mixed's mixed-radix form for n (the lowering's)."""
    (form,) = transform_passes(n, False)
    assert form.radix == 1
    return {"radix": 1, "span": form.span, "passes": form.count, "kernel": "fft_mixed"}


@pytest.mark.parametrize("n,radices", [(200, [5, 5, 4, 2]), (200, [2, 5, 4, 5]), (1000, [5, 2, 5, 4, 5]),
                                       (2000, [5, 5, 5, 4, 4]), (30, [3, 5, 2]), (200, [5, 8, 5]),
                                       (1000, [5, 5, 5, 8]), (1536, [8, 3, 8, 8]), (24, [3, 8])])
def test_mixed_radix_form_takes_its_radices_in_any_order(gt, rng, n, radices):
    """The passes' order is the span's (benchmarks/gpu/fft_shared_bench.py
    FFT_RADIX_ORDER times odd radices first against the lowering's)."""
    gr = _mixed_group_rows(n)
    _check_both_directions(gt, _complex_rows(rng, 2 * gr + 1, n), n, gr, 96, SLOTS_PADDED, False,
                           **dict(_mixed_form(n), span=mixed_span(radices), passes=len(radices)))


def _mixed_group_rows(n: int) -> int:
    return max(1, min(MIXED_SHARED_MAX // n, 3))


@pytest.mark.parametrize("threads", [32, 96, 256])
@pytest.mark.parametrize("n", MIXED_LENGTHS)
def test_mixed_radix_form_plain_rows(gt, rng, n, threads):
    gr = _mixed_group_rows(n)
    _check_both_directions(gt, _complex_rows(rng, 2 * gr + 1, n), n, gr, threads, SLOTS_PADDED, False,
                           **_mixed_form(n))


@pytest.mark.parametrize("n", [3, 12, 200, 1000])
def test_mixed_radix_form_in_place(gt, rng, n):
    """Source and destination one buffer: every group reads all its rows
    before it writes any (the first pass reads the source, the last writes
    the destination, a barrier or more between)."""
    gr = _mixed_group_rows(n)
    rows = 2 * gr + 1
    x = _complex_rows(rng, rows, n)
    y = x.copy()
    _run(gt, y, y, n, rows, gr, 64, SLOTS_PADDED, **_mixed_form(n))
    _assert_close(y, np.fft.fft(x.astype(np.complex128)), x, n)


@pytest.mark.parametrize("n", [5, 100, 400])
def test_mixed_radix_form_staged_source_and_destination(gt, rng, n):
    """A real source into every other complex slot of the destination, and
    a complex source to the real part only, scaled (the general helpers
    in the first and last passes)."""
    gr = _mixed_group_rows(n)
    rows = 2 * gr + 1
    xr = rng.standard_normal((rows, n)).astype(np.float32)
    y = np.zeros((rows, 2 * n), np.complex64)
    _run(gt, xr, y, n, rows, gr, 128, SLOTS_SWIZZLED, load_mode=1, src_row=n, src_step=1, dst_row=4 * n,
         dst_step=4, **_mixed_form(n))
    _assert_close(y[:, ::2], np.fft.fft(xr.astype(np.float64)), xr, n)
    assert not y[:, 1::2].any()
    x = _complex_rows(rng, rows, n)
    yr = np.zeros((rows, n), np.float32)
    _run(gt, x, yr, n, rows, gr, 128, SLOTS_SWIZZLED, store_mode=1, dst_row=n, dst_step=1, scale=0.5, inverse=1,
         **_mixed_form(n))
    _assert_close(yr, (np.fft.ifft(x.astype(np.complex128)) * n * 0.5).real, x, n, 0.5)


@pytest.mark.parametrize("m", [3, 100, 200, 1000])
@pytest.mark.parametrize("slots", [1, 2])
def test_mixed_radix_form_rfft_unpacked_in_the_store(gt, rng, m, slots):
    """rfft of 2m (Whisper's 400: m = 200) as the length-m transform of the
    packed signal, its m + 1 bins unpacked by the store: into dense rows
    (8-byte stores), or every other complex slot (a float at a time)."""
    gr = _mixed_group_rows(m)
    rows = 2 * gr + 1
    x = rng.standard_normal((rows, 2 * m)).astype(np.float32)
    y = np.zeros((rows, slots * (m + 1)), np.complex64)
    _run(gt, x, y, m, rows, gr, 256, SLOTS_PADDED, post=twiddles(2 * m), store_mode=STORE_RFFT,
         dst_row=2 * slots * (m + 1), dst_step=2 * slots, dst_count=m + 1, **_mixed_form(m))
    _assert_close(y[:, ::slots], np.fft.rfft(x.astype(np.float64)), x, 2 * m)
    if slots == 2:
        assert not y[:, 1::2].any()
    power = np.zeros((rows, slots * (m + 1)), np.float32)   # store mode 3: the power, a float every `slots`
    _run(gt, x, power, m, rows, gr, 256, SLOTS_PADDED, post=twiddles(2 * m), store_mode=STORE_RFFT_POWER,
         dst_row=slots * (m + 1), dst_step=slots, dst_count=m + 1, **_mixed_form(m))
    _assert_power_close(power[:, ::slots], np.fft.rfft(x.astype(np.float64)), x, 2 * m)
    if slots == 2:
        assert not power[:, 1::2].any()


@pytest.mark.parametrize("m,hop,pad,reflect", [(200, 160, 200, 0), (200, 160, 200, 1), (100, 50, 100, 1),
                                               (200, 161, 200, 0), (12, 6, 12, 0)])
def test_mixed_radix_form_reads_windowed_frames_of_padded_signals(gt, rng, m, hop, pad, reflect):
    """The log-mel front end's rfft (rlx.signal): frames of 2m samples, hop
    apart, of signals padded by `pad` on each side (zeros, or numpy.pad's
    reflect) read in place, times a window, packed as m complex pairs,
    bins unpacked by the store. Even hops and pads read the frames inside
    their signal as 8-byte pairs (the first pass's frames form), frames
    reaching into the padding and an odd hop through the general helper."""
    signals, length = 2, 2 * m * 5 + 2 * hop
    frames = 1 + (length + 2 * pad - 2 * m) // hop
    x = rng.standard_normal((signals, length)).astype(np.float32)
    window = rng.uniform(0.5, 1.5, 2 * m).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (pad, pad)), mode="reflect" if reflect else "constant")
    want_frames = np.stack([padded[:, f * hop:f * hop + 2 * m] for f in range(frames)], axis=1) * window
    rows = signals * frames
    gr = _mixed_group_rows(m)
    y = np.zeros((rows, m + 1), np.complex64)
    _run(gt, x, y, m, rows, gr, 128, SLOTS_PADDED, pre=window, post=twiddles(2 * m), pre_mul=2, src_row=hop,
         src_step=2, src_len=m, src_rpb=frames, src_block=length, src_pad=pad, src_valid=length,
         src_reflect=reflect, store_mode=STORE_RFFT, dst_row=2 * (m + 1), dst_count=m + 1, **_mixed_form(m))
    want = np.fft.rfft(want_frames.reshape(rows, 2 * m))
    _assert_close(y, want, want_frames.reshape(rows, 2 * m), 2 * m)
