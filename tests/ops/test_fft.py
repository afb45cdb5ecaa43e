"""FFT family (fft, ifft, rfft, irfft, real, imag, complex) and the c64
dtype: every length runs (powers of two in one group, 2^a 3^b 5^c by
Stockham passes, anything else by Bluestein), checked against numpy.fft in
float64 for each norm mode, with round trips, strided inputs, precision
policies and the error cases. Runs on --rlx-device like the other op suites.

Tolerance: per row, max |got - want| <= 1e-5 * log2(max(N, 2)) * |x|_2 *
s, where |x|_2 is the input row's norm and s the transform's scale (1,
1/sqrt N or 1/N for the norm mode and direction): an FFT's error grows
with log N, and each output is at most |x|_2 sqrt(N) unscaled.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import rlx
from rlx import env
from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import c64
from rlx.reference import run_reference
from rlx.runtime.target import Target
from rlx.tune.calibration import default_calibration
from rlx.tune.cost import CostModel, decision_model
from rlx.tune.decide import lower_for

from .helpers import force_gpu_fft_form, kernels_of

NORMS = ["backward", "ortho", "forward"]
SMALL = [1, 2, 3, 5, 7, 8, 16, 32, 64, 100, 128, 256, 400, 512, 1000, 1024, 2048, 4096]
LARGE = [4097, 8192, 65536]
# Batch 37 only where the group-memory and short pass chains run; the large
# sizes (multi-pass and Bluestein over global memory) run one or two rows.
CASES = [(n, b) for n in SMALL for b in (1, 37)] + [(4097, 1), (4097, 2), (8192, 1), (8192, 3), (65536, 1)]
# 2^a 3^b 5^c past a GPU's mixed-radix form: in the CPU's one dispatch and
# its four-step (6144 = 96 x 64; 5000 = 125 x 40 and 4500 = 75 x 60, whose
# blocks of columns end in a short group of lanes); GPUs' Stockham passes.
CASES += [(3000, 1), (3000, 5), (6144, 2), (10000, 2), (5000, 3), (4500, 3)]


def _scale(norm: str, n: int, inverse: bool) -> float:
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "backward") == inverse else 1.0


def _assert_close(got, want, x_norm, n, scale, what):
    """got, want [..., K]; x_norm [...]: the input rows' 2-norms."""
    assert got.shape == want.shape, what
    err = np.abs(got.astype(np.complex128) - want).reshape(len(x_norm), -1).max(axis=-1)
    bound = 1e-5 * math.log2(max(n, 2)) * x_norm * scale
    worst = int(np.argmax(err / np.maximum(bound, 1e-300)))
    assert (err <= bound).all(), f"{what}: row {worst} error {err[worst]:.3g} > bound {bound[worst]:.3g}"


def _check_fft_and_ifft(x: np.ndarray, kernels: list[str]) -> None:
    """fft and ifft of x's rows in one graph: its kernels, and both against numpy."""
    g = rlx.Graph()
    node = g.input("x", x.shape, "c64")
    g.set_outputs(y=g.fft(node), z=g.ifft(node))
    exe = rlx.compile(g)
    assert kernels_of(exe) == kernels
    out = exe.run(x=x)
    n, norm = x.shape[-1], np.linalg.norm(x, axis=-1)
    _assert_close(out["y"], np.fft.fft(x.astype(np.complex128)), norm, n, 1.0, "fft")
    _assert_close(out["z"], np.fft.ifft(x.astype(np.complex128)), norm, n, 1 / n, "ifft")


def _cpu_form() -> bool:
    """Whether this device runs fft_shared's CPU form (shaders/fft_cpu.h; groups
    of one thread): irfft_pre fused into its load, long powers of two
    as its four-step."""
    g = rlx.Graph()
    g.set_outputs(y=g.rfft(g.input("x", (1, 8), "f32")))
    return rlx.compile(g).target.one_thread_groups


def _one_dispatch_kernel(n: int) -> str:
    """The kernel of a length-n transform's one dispatch on this device:
    fft_shared, or on GPUs fft_mixed where n is not a power of two
    (rlx/lowering/fft.py shared_kernel)."""
    return "fft_mixed_c64" if n & (n - 1) and not _cpu_form() else "fft_shared_c64"


def _cdata(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n, batch", CASES, ids=[f"N{n}-B{b}" for n, b in CASES])
def test_transforms_match_numpy(n, batch, norm, rng):
    """fft, ifft (c64 and promoted f32), rfft and irfft of one length in one
    graph, plus the two round trips, against numpy.fft in float64."""
    m = n // 2 + 1
    g = rlx.Graph()
    x = g.input("x", (batch, n), "c64")
    r = g.input("r", (batch, n), "f32")
    h = g.input("h", (batch, m), "c64")
    g.set_outputs(fft=g.fft(x, norm), ifft=g.ifft(x, norm), fft_real=g.fft(r, norm), rfft=g.rfft(r, norm),
                  irfft=g.irfft(h, n, norm), round_c=g.ifft(g.fft(x, norm), norm),
                  round_r=g.irfft(g.rfft(r, norm), n, norm))
    xv, rv, hv = _cdata(rng, (batch, n)), rng.standard_normal((batch, n)).astype(np.float32), _cdata(rng, (batch, m))
    got = rlx.compile(g).run(x=xv, r=rv, h=hv)
    x64, r64, h64 = xv.astype(np.complex128), rv.astype(np.float64), hv.astype(np.complex128)
    xn, rn = np.linalg.norm(x64, axis=-1), np.linalg.norm(r64, axis=-1)
    hn = math.sqrt(2) * np.linalg.norm(h64, axis=-1)    # the full Hermitian spectrum's norm, at most
    fwd, inv = _scale(norm, n, False), _scale(norm, n, True)
    assert got["fft"].dtype == np.complex64 and got["rfft"].shape == (batch, m)
    assert got["irfft"].dtype == np.float32 and got["irfft"].shape == (batch, n)
    _assert_close(got["fft"], np.fft.fft(x64, norm=norm), xn, n, fwd, "fft")
    _assert_close(got["ifft"], np.fft.ifft(x64, norm=norm), xn, n, inv, "ifft")
    _assert_close(got["fft_real"], np.fft.fft(r64, norm=norm), rn, n, fwd, "fft of f32")
    _assert_close(got["rfft"], np.fft.rfft(r64, norm=norm), rn, n, fwd, "rfft")
    _assert_close(got["irfft"], np.fft.irfft(h64, n, norm=norm), hn, n, inv, "irfft")
    _assert_close(got["round_c"], x64, xn, n, 2.0, "ifft(fft(x))")
    _assert_close(got["round_r"], r64, rn, n, 2.0, "irfft(rfft(x))")


@pytest.mark.parametrize("n", [6, 9, 15, 27, 45, 360, 1536, 2187, 3125, 6000, 11, 13, 97, 2047, 2049, 5003, 12289])
def test_more_radix_mixes_and_bluestein_lengths(n, rng):
    """Radix-3 and radix-5 passes in every position, and Bluestein over
    every inner path (L <= 4096 in group memory; larger as the four-step
    on the CPU (fft, ifft, rfft, irfft), by passes on GPUs by default)."""
    g = rlx.Graph()
    x = g.input("x", (3, n), "c64")
    r = g.input("r", (3, n), "f32")
    g.set_outputs(f=g.fft(x, "ortho"), i=g.ifft(x), rt=g.irfft(g.rfft(r), n))
    xv, rv = _cdata(rng, (3, n)), rng.standard_normal((3, n)).astype(np.float32)
    got = rlx.compile(g).run(x=xv, r=rv)
    x64 = xv.astype(np.complex128)
    xn, rn = np.linalg.norm(x64, axis=-1), np.linalg.norm(rv.astype(np.float64), axis=-1)
    _assert_close(got["f"], np.fft.fft(x64, norm="ortho"), xn, n, 1 / math.sqrt(n), "fft")
    _assert_close(got["i"], np.fft.ifft(x64), xn, n, 1 / n, "ifft")
    _assert_close(got["rt"], rv.astype(np.float64), rn, n, 2.0, "irfft(rfft(x))")


@pytest.mark.parametrize("n, m", [(8, 3), (8, 9), (9, 5), (7, 2), (1, 1), (6, 4), (4097, 2049)])
def test_irfft_follows_numpy_for_any_spectrum_length(n, m, rng):
    """Spectra shorter than n // 2 + 1 are zero-padded, longer ones cut; the
    imaginary parts of bin 0 and (even n) bin n / 2 are ignored."""
    g = rlx.Graph()
    g.set_outputs(y=g.irfft(g.input("h", (3, m), "c64"), n))
    hv = _cdata(rng, (3, m))
    got = rlx.compile(g).run(h=hv)["y"]
    want = np.fft.irfft(hv.astype(np.complex128), n)
    _assert_close(got, want, math.sqrt(2) * np.linalg.norm(hv, axis=-1), n, 1 / n, "irfft")


def test_irfft_default_length_is_numpys():
    g = rlx.Graph()
    assert tuple(g.irfft(g.input("h", (2, 5), "c64")).shape) == (2, 8)


def test_algorithm_per_length(monkeypatch):
    """One group-memory dispatch for powers of two up to 4096 and for other
    2^a 3^b 5^c up to 2048 on GPUs, 4096 on the CPU (where the cost model
    prefers it: pinned here), a Stockham pass per radix for longer ones,
    and Bluestein (two inner transforms) for the rest. The CPU runs powers
    of two above 4096 as two fft_shared dispatches (the four-step), other
    2^a 3^b 5^c (6144 = 96 x 64, 10000 = 125 x 80), and Bluestein's longer
    inner transforms as four-steps."""
    monkeypatch.setattr(CostModel, "prefer_fft_shared", lambda self, *a: True)

    def kernels(n):
        g = rlx.Graph()
        g.set_outputs(y=g.fft(g.input("x", (2, n), "c64")))
        return kernels_of(rlx.compile(g))

    assert kernels(1024) == ["fft_shared_c64"]
    assert kernels(100) == [_one_dispatch_kernel(100)]     # mixed radix 4, 5, 5 in group memory
    cpu = _cpu_form()
    assert kernels(3000) == (["fft_shared_c64"] if cpu                  # mixed radix in the CPU form's arrays
                             else ["fft_stage_c64"] * 6)                 # past half the group memory: 4, 2, 3, 5, 5, 5
    assert kernels(6144) == (["fft_shared_c64"] * 2 if cpu              # 96 x 64
                             else ["fft_stage_c64"] * 7)                 # 4^5, 2, 3
    assert kernels(10000) == (["fft_shared_c64"] * 2 if cpu             # 125 x 80
                              else ["fft_stage_c64"] * 6)                # 4, 4, 5, 5, 5, 5
    assert kernels(8192) == ["fft_shared_c64"] * 2                        # the four-step: 128 x 64
    assert kernels(7) == ["fft_shared_c64"] * 2              # Bluestein, L = 16
    assert kernels(4097) == ["fft_shared_c64"] * 4           # Bluestein's four-steps: 96 x 96 (GPUs: 128 x 128)
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "0")         # GPUs then take a Stockham pass per radix
    assert kernels(8192) == (["fft_shared_c64"] * 2 if cpu else ["fft_stage_c64"] * 7)       # 4^6 * 2
    assert kernels(4097) == (["fft_shared_c64"] * 4 if cpu else ["fft_stage_c64"] * 14)      # 4^7 each way


@pytest.mark.parametrize("backend", ["cuda", "metal"])
def test_gpu_lowering_runs_mixed_lengths_in_fft_mixed(backend, monkeypatch):
    """Lowered for a GPU without one (lower_for: the compile's own pipeline
    over a Target): mixed-radix lengths run in fft_mixed, powers of two in
    fft_shared; rfft's half length and irfft's too. Every kernel the
    lowering dispatches is one the op declares (lowers(kernels=...))."""
    monkeypatch.setattr(CostModel, "prefer_fft_shared", lambda self, *a: True)
    gpu = Target(backend=backend, compute_units=132, max_threads_per_group=1024, simd_width=32,
                 max_buffer_length=1 << 36)

    def kernels(op, n):
        g = rlx.Graph()
        x = g.input("x", (64, n // 2 + 1 if op == "irfft" else n), "f32" if op == "rfft" else "c64")
        g.set_outputs(y=g.irfft(x, n) if op == "irfft" else getattr(g, op)(x))
        return [t.kernel for t in lower_for(g, gpu, decision_model(backend)) if t.kernel]

    assert kernels("fft", 1000) == ["fft_mixed_c64"]
    assert kernels("ifft", 100) == ["fft_mixed_c64"]
    assert kernels("fft", 2000) == ["fft_mixed_c64"]
    assert kernels("fft", 1024) == ["fft_shared_c64"]
    assert kernels("rfft", 400) == ["fft_mixed_c64"]           # 200, bins unpacked in the store
    assert kernels("irfft", 400) == ["irfft_pre_c64", "fft_mixed_c64"]
    assert kernels("rfft", 4096) == ["fft_shared_c64"]
    assert kernels("fft", 3000) == ["fft_stage_c64"] * 6       # past fft_mixed's 2048: a Stockham pass per radix


def test_mixed_radices_take_the_fewest_passes_on_gpus():
    """The mixed-radix form's passes: factor's on the CPU with its 3s two at
    a time as radix 9 (a third one alone); on GPUs radix-8 and radix-4
    passes for the power of two, ceil(a / 3) of them, as even as they come,
    then the 3s and 5s."""
    from rlx.lowering.fft import MIXED_MAX_PASSES, mixed_radices, mixed_span

    assert mixed_radices(200, False) == [4, 2, 5, 5]
    cpu = {2025: [9, 9, 5, 5], 2187: [9, 9, 9, 3], 12: [4, 3], 3072: [4, 4, 4, 4, 4, 3], 7: None}
    assert {n: mixed_radices(n, False) for n in cpu} == cpu
    for n in range(2, 4097):
        radices = mixed_radices(n, False)
        if radices is not None:
            assert math.prod(radices) == n and radices.count(3) <= 1 and len(radices) <= MIXED_MAX_PASSES, n
    want = {200: [8, 5, 5], 1000: [8, 5, 5, 5], 2000: [4, 4, 5, 5, 5], 100: [4, 5, 5], 6: [2, 3], 15: [3, 5],
            1536: [8, 8, 8, 3], 384: [8, 4, 4, 3], 7: None}
    assert {n: mixed_radices(n, True) for n in want} == want
    for n in range(2, 4097):
        radices = mixed_radices(n, True)
        if radices is not None:
            assert math.prod(radices) == n and len(radices) <= MIXED_MAX_PASSES, n
    assert mixed_span([8, 5, 5]) == 8 | 5 << 4 | 5 << 8


def test_four_step_split_of_smooth_lengths_on_the_cpu(monkeypatch):
    """The CPU's four-step factors (n1 >= n2, both within fft_shared):
    powers of two balanced, other 2^a 3^b 5^c with factors of 16 or more,
    the fewest lanes idle in each block's short last group; none where no two factors
    within SHARED_MAX make n (3^15: Bluestein takes it); on GPUs powers of
    two alone, and none under RLX_FFT_GPU_FOUR_STEP=0."""
    from types import SimpleNamespace

    from rlx.lowering import fft as fft_lowering

    cpu = SimpleNamespace(target=SimpleNamespace(one_thread_groups=True))
    gpu = SimpleNamespace(target=SimpleNamespace(one_thread_groups=False))
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "0")

    def split(lw, n):
        return fft_lowering._four_step_split(lw, n, *fft_lowering._plain_rows(n))

    want = {8192: (128, 64), 65536: (256, 256), 6144: (96, 64), 10000: (125, 80), 5000: (125, 40),
            4500: (75, 60), 15000: (125, 120), 59049: (243, 243), 4096: None, 3**15: None, 4097: None}
    assert {n: split(cpu, n) for n in want} == want
    assert split(gpu, 8192) is None and split(gpu, 6144) is None
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "1")
    assert split(gpu, 8192) == (128, 64) and split(gpu, 6144) is None
    assert fft_lowering._idle_lanes(16) == 0 and fft_lowering._idle_lanes(8) == 0.5
    assert fft_lowering._idle_lanes(40) == 1 / 6   # three groups of 16 lanes, the last with 8 rows


@pytest.mark.parametrize("n", [8, 256, 1024, 4096, 6, 100, 400, 1000, 2025])
@pytest.mark.parametrize("batch", [1, 37])
def test_stockham_passes_where_the_cost_model_prefers_them(n, batch, monkeypatch, rng):
    """Lengths fft_shared covers in one dispatch, taken as a Stockham pass
    per radix when the cost model says so (few long rows on a GPU): every
    op still matches numpy, and the complex transforms run no fft_shared."""
    monkeypatch.setattr(CostModel, "prefer_fft_shared", lambda self, *a: False)
    x = _cdata(rng, (batch, n))
    xr = rng.standard_normal((batch, n)).astype(np.float32)
    for op, arg in (("fft", x), ("ifft", x), ("rfft", xr), ("irfft", np.fft.rfft(xr).astype(np.complex64))):
        g = rlx.Graph()
        g.set_outputs(y=getattr(g, op)(g.input("x", arg.shape, "c64" if arg.dtype == np.complex64 else "f32"),
                                       **({"n": n} if op == "irfft" else {})))
        exe = rlx.compile(g)
        if op in ("fft", "ifft") and n > 1:
            assert "fft_shared_c64" not in kernels_of(exe) and "fft_stage_c64" in kernels_of(exe), op
        wide = arg.astype(np.complex128 if arg.dtype == np.complex64 else np.float64)
        want = getattr(np.fft, op)(wide, **({"n": n} if op == "irfft" else {}))
        norms = np.linalg.norm(wide.reshape(batch, -1), axis=-1)
        _assert_close(exe.run(x=arg)["y"], want, norms, n, 1.0 if op in ("fft", "rfft") else 1 / n, f"{op} {n}")


def test_cost_model_follows_the_measured_fft_paths():
    """The documented defaults pick the path measured faster: the CPU keeps
    fft_shared (a group per row is a core's work); on the H200 fft_shared
    beat the Stockham passes at every measured shape (session 14's
    fft_path_choice.py: 1-64 rows of 4096, 1-256 of 1024), and a 2-core CPU's
    slow group-memory-free passes never win either. A model whose shared
    rate is tiny takes the passes, and says so in its decisions."""
    host, cuda = decision_model("host"), decision_model("cuda")
    assert host.prefer_fft_shared(4096, 1, 1, 6) and host.prefer_fft_shared(1024, 256, 16, 5)
    for rows, n, passes in ((1, 4096, 6), (4, 4096, 6), (64, 4096, 6), (1, 1024, 5), (256, 1024, 5)):
        assert cuda.prefer_fft_shared(n, rows, rows, passes), (rows, n)
    assert any("fft 1 x 4096: fft_shared" in line for line in cuda.describe_decisions())
    base = default_calibration("cuda")
    slow_shared = CostModel(dataclasses.replace(base, family_rates={**base.family_rates, "fft_shared": 1e9}))
    assert not slow_shared.prefer_fft_shared(4096, 1, 1, 6)
    assert any("fft 1 x 4096: 6 fft_stage passes" in line for line in slow_shared.describe_decisions())


# powers of two: every pass size (16, 8, 4, 2) as the only pass and as the first
# of two or three; then mixed radix
@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 6, 100, 1000, 2025])
@pytest.mark.parametrize("group_rows,layout", [(2, 1), (3, 2), (16, 1)])
def test_shared_transform_with_rows_per_group_and_swizzle(n, group_rows, layout, monkeypatch, rng):
    """fft_shared as GPUs run it (several rows per group, GPU group-memory
    slots, XOR-swizzled and padded; for 2^a 3^b 5^c lengths the mixed-radix passes between the two
    halves of group memory), forced on whatever device runs the suite: rows
    that fill a group, a last group holding fewer, and the swizzle across
    rows of the array."""
    force_gpu_fft_form(monkeypatch, group_rows, layout)
    for rows in (1, 5, 37):
        x = _cdata(rng, (rows, n))
        _check_fft_and_ifft(x, [_one_dispatch_kernel(n)] * 2)
        if 2 <= n <= 2048:   # rfft of 2n: the length-n transform, its bins unpacked in the same dispatch's store
            xr = rng.standard_normal((rows, 2 * n)).astype(np.float32)
            g = rlx.Graph()
            g.set_outputs(y=g.rfft(g.input("x", xr.shape)))
            exe = rlx.compile(g)
            assert kernels_of(exe) == [_one_dispatch_kernel(n)], kernels_of(exe)
            _assert_close(exe.run(x=xr)["y"], np.fft.rfft(xr.astype(np.float64)), np.linalg.norm(xr, axis=-1), 2 * n,
                          1.0, "rfft")
            # irfft to 2n: its half-length spectrum built where the form can (the CPU's load), else by irfft_pre
            h = np.fft.rfft(xr.astype(np.float64)).astype(np.complex64)
            g = rlx.Graph()
            g.set_outputs(y=g.irfft(g.input("h", h.shape, "c64"), 2 * n))
            _assert_close(rlx.compile(g).run(h=h)["y"], np.fft.irfft(h.astype(np.complex128), 2 * n),
                          np.sqrt(2) * np.linalg.norm(h, axis=-1), 2 * n, 1 / (2 * n), "irfft")


@pytest.mark.parametrize("n", [8192, 32768])
@pytest.mark.parametrize("group_rows,layout", [(3, 2), (16, 1)])
def test_four_step_in_the_gpu_form(n, group_rows, layout, monkeypatch, rng):
    """Powers of two above 4096 as the four-step's two fft_shared dispatches
    in the GPU form (RLX_FFT_GPU_FOUR_STEP; the CPU's own form runs it by
    default): rows in blocks, the twiddle of the first dispatch's store
    (post_mul 2), stores as columns of the result."""
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "1")
    force_gpu_fft_form(monkeypatch, group_rows, layout)
    for rows in (1, 3):
        x = _cdata(rng, (rows, n))
        _check_fft_and_ifft(x, ["fft_shared_c64"] * 4)


@pytest.mark.parametrize("n", [2053, 4097])
@pytest.mark.parametrize("group_rows,layout", [(3, 2), (16, 1)])
def test_bluestein_four_step_in_the_gpu_form(n, group_rows, layout, monkeypatch, rng):
    """Bluestein's inner transforms of L = 8192 and 16384 as two four-steps
    in the GPU form (RLX_FFT_GPU_FOUR_STEP): the first load's chirp and
    zero padding past the row (pre_mul 3), the spectrum in the forward
    store and the chirp and the first n outputs in the inverse's (post_mul
    3), through the shared load and store helpers of shaders/fft.h."""
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "1")
    force_gpu_fft_form(monkeypatch, group_rows, layout)
    for rows in (1, 3):
        _check_fft_and_ifft(_cdata(rng, (rows, n)), ["fft_shared_c64"] * 8)


def test_bluestein_four_step_reads_any_sequence(rng):
    """Bluestein's four-steps (the CPU form) take complex and real samples
    of any step and irfft's half spectrum (mirrored by the index in the
    sequence), and store complex bins or the real part: a transposed real
    input (elements two floats apart), odd rfft's first n // 2 + 1 bins,
    fft(ifft(x)) and odd irfft, short and long spectra; a framing view
    (rows in blocks) takes the Stockham passes. GPUs take the four-steps
    too unless RLX_FFT_GPU_FOUR_STEP=0; the numerics hold either way."""
    four_steps = 6 if _cpu_form() or env.fft_gpu_four_step() else 0
    n = 2053
    g = rlx.Graph()
    t = g.input("t", (n, 2), "f32")            # transposed: real elements two floats apart
    r = g.input("r", (2, n), "f32")
    x = g.input("x", (2, n), "c64")
    h = g.input("h", (2, n // 2 + 1), "c64")
    short = g.input("short", (2, 700), "c64")
    framed = g.input("framed", (2, n, 3), "f32")   # transpose(0, 2, 1): rows in blocks
    g.set_outputs(s=g.fft(g.transpose(t, (1, 0))), rf=g.rfft(r), y=g.fft(g.ifft(x)), ir=g.irfft(h, n),
                  irs=g.irfft(short, n), fr=g.fft(g.transpose(framed, (0, 2, 1))))
    exe = rlx.compile(g)
    # The framed rows (and the rest without the four-step): L = 8192 = 4^6 * 2, a pass a radix each way.
    assert kernels_of(exe).count("fft_stage_c64") == (7 - four_steps) * 2 * 7
    assert kernels_of(exe).count("fft_shared_c64") == four_steps * 4
    tv, rv = (rng.standard_normal(shape).astype(np.float32) for shape in ((n, 2), (2, n)))
    xv, hv, sv = _cdata(rng, (2, n)), _cdata(rng, (2, n // 2 + 1)), _cdata(rng, (2, 700))
    fv = rng.standard_normal((2, n, 3)).astype(np.float32)
    out = exe.run(t=tv, r=rv, x=xv, h=hv, short=sv, framed=fv)
    t64, x64 = tv.T.astype(np.float64), xv.astype(np.complex128)
    _assert_close(out["s"], np.fft.fft(t64), np.linalg.norm(t64, axis=-1), n, 1.0, "strided real fft")
    _assert_close(out["rf"], np.fft.rfft(rv.astype(np.float64)), np.linalg.norm(rv, axis=-1), n, 1.0, "odd rfft")
    _assert_close(out["y"], x64, np.linalg.norm(x64, axis=-1), n, 1.0, "fft(ifft(x))")
    for key, spectrum in (("ir", hv), ("irs", sv)):
        _assert_close(out[key], np.fft.irfft(spectrum.astype(np.complex128), n),
                      math.sqrt(2) * np.linalg.norm(spectrum, axis=-1), n, 1 / n, "odd irfft")
    f64 = fv.transpose(0, 2, 1).astype(np.float64)
    _assert_close(out["fr"], np.fft.fft(f64), np.linalg.norm(f64, axis=-1).reshape(-1), n, 1.0, "framed fft")


def test_bluestein_length_and_factors(monkeypatch):
    """Bluestein's convolution length on the CPU: the least product of two
    of the four-step's factors (multiples of 16, each one fft_shared
    dispatch) at or above 2n - 1 where it saves a quarter of the points
    against the power of two; on GPUs the power of two, and none under
    RLX_FFT_GPU_FOUR_STEP=0."""
    from types import SimpleNamespace

    from rlx.lowering.fft import _bluestein_split, factor

    cpu = SimpleNamespace(target=SimpleNamespace(one_thread_groups=True))
    gpu = SimpleNamespace(target=SimpleNamespace(one_thread_groups=False))
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "0")
    assert _bluestein_split(cpu, 4097) == (9216, 96, 96)          # the power of two: 16384
    assert _bluestein_split(cpu, 2049) == (4608, 48, 96)
    assert _bluestein_split(cpu, 12289) == (32768, 256, 128)      # 25600 = 16 x 1600 saves less than a quarter
    assert _bluestein_split(cpu, 2047) is None                    # L = 4096: one dispatch, no four-step
    for n in (2049, 3001, 4099, 10007, 65537):
        length, n1, n2 = _bluestein_split(cpu, n)
        assert length == n1 * n2 >= 2 * n - 1 and n1 % 16 == 0 and n2 % 16 == 0
        assert factor(n1) is not None and factor(n2) is not None
    assert _bluestein_split(gpu, 4097) is None
    monkeypatch.delenv("RLX_FFT_GPU_FOUR_STEP", raising=False)   # the default: on
    assert _bluestein_split(gpu, 4097) == (16384, 128, 128)


def test_gpus_take_the_four_step_unless_told_not_to(monkeypatch):
    from types import SimpleNamespace

    from rlx.lowering.fft import _four_step_split

    gpu = SimpleNamespace(target=SimpleNamespace(one_thread_groups=False))
    load = {"mode": 0, "step": 2, "len": 65536, "row": 2 * 65536}
    store = {"mode": 0, "step": 2, "count": 65536}
    monkeypatch.setenv("RLX_FFT_GPU_FOUR_STEP", "0")
    assert _four_step_split(gpu, 65536, load, store) is None
    monkeypatch.delenv("RLX_FFT_GPU_FOUR_STEP", raising=False)   # the default: on
    assert _four_step_split(gpu, 65536, load, store) == (256, 256)
    assert _four_step_split(gpu, 4096, load, store) is None


def test_rfft_of_even_length_is_a_half_length_transform(rng):
    """rfft of an even N >= 4 with contiguous samples: the N / 2 complex
    transform of the packed signal (any algorithm: here shared, Stockham
    and Bluestein half lengths) and rfft_post; odd N and strided samples
    take the full-length transform. On every device fft_shared's store does
    rfft_post's unpacking where it covers N / 2 alone (one dispatch:
    shaders/fft_cpu.h on the CPU, rlx_fft_store_rfft on GPUs).
    Numerics against numpy for every norm."""
    def kernels(n, strided=False):
        g = rlx.Graph()
        x = g.input("x", (n, 3) if strided else (3, n), "f32")
        g.set_outputs(y=g.rfft(g.transpose(x, (1, 0)) if strided else x))   # strided: read in place, stride 3
        return kernels_of(rlx.compile(g))

    assert kernels(1024) == ["fft_shared_c64"]                         # 512 in group memory
    assert kernels(400) == [_one_dispatch_kernel(200)]                 # 200 = 4 * 2 * 5 * 5 in group memory
    assert kernels(14) == ["fft_shared_c64"] * 2 + ["rfft_post_c64"]  # 7: Bluestein, L = 16
    assert kernels(7) == ["fft_shared_c64"] * 2                       # odd: full length (Bluestein)
    assert kernels(16, strided=True) == ["fft_shared_c64"]
    for n in (4, 6, 14, 22, 400, 8194, 16384):   # 16384: the CPU's four-step at 8192
        x = rng.standard_normal((3, n)).astype(np.float32)
        for norm in NORMS:
            g = rlx.Graph()
            g.set_outputs(y=g.rfft(g.input("x", x.shape, "f32"), norm))
            got = rlx.compile(g).run(x=x)["y"]
            want = np.fft.rfft(x.astype(np.float64), norm=norm)
            scale = {"backward": 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[norm or "backward"]
            _assert_close(got, want, np.linalg.norm(x, axis=-1), n, scale, f"rfft N={n} norm={norm}")


def test_irfft_of_even_length_is_a_half_length_transform(rng):
    """irfft of an even N >= 4: irfft_pre builds the length-N/2 spectrum of
    the output packed in pairs, then one inverse of that length (any
    algorithm) writes the real output; odd N take the full-length inverse.
    Numerics against numpy for every norm, for spectra shorter and longer
    than N / 2 + 1 bins (zeros / ignored). On the CPU, fft_shared's load
    does irfft_pre's work where it covers N / 2 alone (one dispatch)."""
    def kernels(n):
        g = rlx.Graph()
        g.set_outputs(y=g.irfft(g.input("h", (3, n // 2 + 1), "c64"), n))
        return kernels_of(rlx.compile(g))

    shared_half = ["fft_shared_c64"] if _cpu_form() else ["irfft_pre_c64", "fft_shared_c64"]
    assert kernels(1024) == shared_half                               # 512 in group memory
    assert kernels(400) == (shared_half if _cpu_form()                # 200 = 4 * 2 * 5 * 5 in group memory
                            else ["irfft_pre_c64", _one_dispatch_kernel(200)])
    assert kernels(14) == ["irfft_pre_c64"] + ["fft_shared_c64"] * 2  # 7: Bluestein, L = 16
    assert kernels(7) == ["fft_shared_c64"] * 2                       # odd: full length (Bluestein)
    for n, bins in ((4, 3), (6, 2), (14, 8), (22, 15), (400, 201), (8194, 4098), (16384, 8193)):
        h = _cdata(rng, (3, bins))
        for norm in NORMS:
            g = rlx.Graph()
            g.set_outputs(y=g.irfft(g.input("h", h.shape, "c64"), n, norm))
            got = rlx.compile(g).run(h=h)["y"]
            want = np.fft.irfft(h.astype(np.complex128), n, norm=norm)
            scale = {"backward": 1 / n, "ortho": 1 / math.sqrt(n), "forward": 1.0}[norm]
            _assert_close(got, want, math.sqrt(2) * np.linalg.norm(h, axis=-1), n, scale, f"irfft N={n} {norm}")


def _norms(x: np.ndarray) -> np.ndarray:
    """Each row's 2-norm in float64 (f32 norms of 1e-15-scale rows lose the bound's floor)."""
    return np.linalg.norm(x.astype(np.complex128 if np.iscomplexobj(x) else np.float64), axis=-1)


def _odd_length_rows(rng, rows: int, n: int, complex_bins: int = 0) -> np.ndarray:
    """rows of n real samples (or complex_bins half-spectrum bins) whose
    magnitudes span 1e-15 to 1e15 by row, one row of zeros: pairs of rows
    of very different scales share a transform on the CPU."""
    shape = (rows, complex_bins) if complex_bins else (rows, n)
    x = _cdata(rng, shape) if complex_bins else rng.standard_normal(shape).astype(np.float32)
    scales = 10.0 ** rng.uniform(-15, 15, size=(rows, 1))
    x = (x * scales).astype(x.dtype)
    x[rows // 3] = 0
    return x


@pytest.mark.parametrize("rows", [1, 2, 3, 17, 40])
def test_odd_length_rfft_and_irfft_of_many_rows(rows, rng):
    """rfft and irfft of odd N over many rows: on the CPU two real rows a
    transform (shaders/fft_cpu.h rlx_fft_pairs, one fft_shared dispatch;
    odd row counts leave the last pair one row), each row's error within
    the bound of its own norm however different its partner's scale; a
    NaN or an infinity stays in its own row (the chunk runs its rows one at
    a time). fft and ifft of real rows (full spectra) take the same form.
    Against numpy for every norm, N of one and several passes."""
    for n in (5, 45, 2025, 3375):
        x = _odd_length_rows(rng, rows, n)
        h = _odd_length_rows(rng, rows, n, n // 2 + 1)
        for norm in NORMS:
            g = rlx.Graph()
            xin = g.input("x", x.shape, "f32")
            g.set_outputs(y=g.rfft(xin, norm), z=g.irfft(g.input("h", h.shape, "c64"), n, norm), f=g.fft(xin, norm),
                          i=g.ifft(xin, norm))
            exe = rlx.compile(g)
            if _cpu_form():
                assert kernels_of(exe) == ["fft_shared_c64"] * 4
                assert all(("real rows in pairs" in t.label) == (rows > 1) for t in exe.thunks)
            out = exe.run(x=x, h=h)
            scale = _scale(norm, n, False)
            _assert_close(out["f"], np.fft.fft(x.astype(np.float64), norm=norm), _norms(x), n, scale,
                          f"fft of real rows N={n} rows={rows} {norm}")
            _assert_close(out["i"], np.fft.ifft(x.astype(np.float64), norm=norm), _norms(x), n, _scale(norm, n, True),
                          f"ifft of real rows N={n} rows={rows} {norm}")
            _assert_close(out["y"], np.fft.rfft(x.astype(np.float64), norm=norm), _norms(x), n, scale,
                          f"rfft N={n} rows={rows} {norm}")
            _assert_close(out["z"], np.fft.irfft(h.astype(np.complex128), n, norm=norm),
                          math.sqrt(2) * _norms(h), n, _scale(norm, n, True),
                          f"irfft N={n} rows={rows} {norm}")
    if rows < 2:
        return
    n = 45
    x = rng.standard_normal((rows, n)).astype(np.float32)
    h = _cdata(rng, (rows, n // 2 + 1))
    x[1, 3], h[1, 2] = np.nan, np.inf   # row 1 pairs with row 0
    if rows > 3:
        x[rows - 2, 0] = np.inf
    g = rlx.Graph()
    g.set_outputs(y=g.rfft(g.input("x", x.shape, "f32")), z=g.irfft(g.input("h", h.shape, "c64"), n))
    out = rlx.compile(g).run(x=x, h=h)
    with np.errstate(invalid="ignore"):
        want_y, want_z = np.fft.rfft(x.astype(np.float64)), np.fft.irfft(h.astype(np.complex128), n)
    clean = [r for r in range(rows) if np.isfinite(x[r]).all()]
    _assert_close(out["y"][clean], want_y[clean], _norms(x[clean]), n, 1.0, "rfft beside NaN")
    assert not np.isfinite(out["y"][1]).all()
    clean = [r for r in range(rows) if np.isfinite(h[r].view(np.float32)).all()]
    _assert_close(out["z"][clean], want_z[clean], math.sqrt(2) * _norms(h[clean]), n, 1 / n, "irfft beside an infinity")
    assert not np.isfinite(out["z"][1]).all()


def test_batch_dims_strided_inputs_and_parts(rng):
    """Leading batch dims of any rank; a real(x) view (stride 2) and a
    transposed input are read in place; complex(real(x), imag(x)) is x."""
    b0, b1, n = 2, 3, 12
    g = rlx.Graph()
    x = g.input("x", (b0, b1, n), "c64")
    t = g.input("t", (n, 5), "f32")            # transposed: rows of stride 1, elements of stride 5
    w = g.input("w", (3, n, 2), "f32")         # transpose(2, 0, 1): two row strides -> rows in blocks, no copy
    g.set_outputs(a=g.rfft(g.real(x)), b=g.fft(g.imag(x), "ortho"), c=g.rfft(g.transpose(t, (1, 0))),
                  d=g.fft(g.transpose(w, (2, 0, 1))), e=g.complex(g.real(x), g.imag(x)),
                  re=g.real(g.fft(x)), im=g.imag(x))
    xv, tv, wv = _cdata(rng, (b0, b1, n)), rng.standard_normal((n, 5)).astype(np.float32), \
        rng.standard_normal((3, n, 2)).astype(np.float32)
    exe = rlx.compile(g)
    got = exe.run(x=xv, t=tv, w=wv)
    bound = dict(rtol=1e-5, atol=1e-5 * math.log2(n) * 8)
    np.testing.assert_allclose(got["a"], np.fft.rfft(xv.real.astype(np.float64)), **bound)
    np.testing.assert_allclose(got["b"], np.fft.fft(xv.imag.astype(np.float64), norm="ortho"), **bound)
    np.testing.assert_allclose(got["c"], np.fft.rfft(tv.T.astype(np.float64)), **bound)
    np.testing.assert_allclose(got["d"], np.fft.fft(wv.transpose(2, 0, 1).astype(np.float64)), **bound)
    np.testing.assert_array_equal(got["e"], xv)
    np.testing.assert_allclose(got["re"], np.fft.fft(xv.astype(np.complex128)).real, **bound)
    np.testing.assert_array_equal(got["im"], xv.imag)
    assert got["re"].dtype == np.float32
    # real / imag are views (no kernel of their own) and the transposed t, the
    # real(x) / imag(x) rows and d's input (leading dims of two strides: rows
    # in blocks) are read in place: the copies are complex's two dense parts
    # and the outputs re and im (outputs are copied out densely).
    assert kernels_of(exe).count("copy_f32_f32") == 4
    ref = run_reference(g, {"x": xv, "t": tv, "w": wv})
    np.testing.assert_allclose(ref["a"], got["a"], **bound)


def test_empty_batch_and_c64_params_constants_and_lists(rng):
    g = rlx.Graph()
    g.set_outputs(y=g.rfft(g.input("x", (0, 8))))
    assert rlx.compile(g).run(x=np.zeros((0, 8), np.float32))["y"].shape == (0, 5)

    g = rlx.Graph()
    p = g.param("p", (2, 6), "c64")
    k = g.constant(np.arange(6) * (1 + 2j))      # complex128 -> c64
    assert k.dtype is c64
    x = g.input("x", (2, 6), "c64")
    g.set_outputs(p=p, y=g.fft(x), k=g.ifft(k))
    pv = _cdata(rng, (2, 6)).astype(np.complex128)           # converted to c64 when bound
    exe = rlx.compile(g, params={"p": pv})
    got = exe.run(x=[[1, 2j, 3, 4, 5, 6 - 1j]] * 2)          # a list of complex numbers
    np.testing.assert_array_equal(got["p"], pv.astype(np.complex64))
    np.testing.assert_allclose(got["y"][0], np.fft.fft([1, 2j, 3, 4, 5, 6 - 1j]), atol=1e-5)
    np.testing.assert_allclose(got["k"], np.fft.ifft(np.arange(6) * (1 + 2j)), atol=1e-5)
    with pytest.raises(rlx.errors.InputError, match="dtype"):
        exe.run(x=np.zeros((2, 6), np.float32))


@pytest.mark.parametrize("policy", ["f16", "auto"])
def test_precision_policies_keep_the_fft_in_f32(policy, rng):
    """Under f16 policies the FFT ops compute in f32 (a real input from an
    f16 op is cast back) and no c64 value is cast."""
    g = rlx.Graph()
    x = g.input("x", (4, 64))
    y = g.scale_shift(x, 2.0, 0.5)          # computes in f16 under the policy
    spec = g.rfft(y)
    g.set_outputs(spec=spec, back=g.mul(g.irfft(spec, 64), x))
    exe = rlx.compile(g, precision=policy)
    xv = rng.standard_normal((4, 64)).astype(np.float32)
    got = exe.run(x=xv)
    y64 = (2 * xv.astype(np.float64) + 0.5)
    np.testing.assert_allclose(got["spec"], np.fft.rfft(y64), atol=0.05)
    np.testing.assert_allclose(got["back"], y64 * xv, atol=0.05)
    assert got["spec"].dtype == np.complex64


def test_errors():
    g = rlx.Graph()
    x = g.input("x", (2, 8), "c64")
    r = g.input("r", (2, 8))
    h16 = g.input("h16", (2, 8), "f16")
    with pytest.raises(DTypeError, match="fft: input must be c64"):
        g.fft(h16)
    with pytest.raises(DTypeError, match="rfft: input must be a real f32"):
        g.rfft(x)
    with pytest.raises(DTypeError, match="irfft: input must be a c64"):
        g.irfft(r, 8)
    with pytest.raises(DTypeError, match="only the FFT family"):
        g.add(x, x)
    with pytest.raises(DTypeError, match="only the FFT family"):
        g.softmax(x)
    with pytest.raises(DTypeError):
        g.cast(r, "c64")
    with pytest.raises(DTypeError, match="real: input must be c64"):
        g.real(r)
    with pytest.raises(DTypeError, match="must be f32"):
        g.complex(h16, h16)
    with pytest.raises(ShapeError, match="one shape"):
        g.complex(r, g.input("r3", (2, 3)))
    with pytest.raises(DTypeError):
        g.state("s", (4, 8), "c64")
    for bad_n in (0, -4, 2.5, True):
        with pytest.raises(GraphError, match="n"):
            g.irfft(x, bad_n)
    with pytest.raises(GraphError, match="n must be >= 1"):
        g.irfft(g.input("one", (3, 1), "c64"))     # default 2 (M - 1) = 0
    for bad_norm in ("Ortho", "none", 1):
        with pytest.raises(GraphError, match="norm must be one of"):
            g.fft(x, bad_norm)
    with pytest.raises(ShapeError, match="empty"):
        g.fft(g.input("e", (3, 0), "c64"))
    with pytest.raises(ShapeError, match="scalar"):
        g.rfft(g.input("s0", ()))
