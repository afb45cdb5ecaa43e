"""rfft of windowed frames (issue 19): fusion turns rfft(mul(frames, window))
into windowed_rfft (rlx/opt/fusion.py), whose window fft_shared's load
applies where one dispatch covers the half-length transform (the pre
binding, free under the store's rfft unpacking), and a [B, frames, N]
framing view, whose two leading strides do not merge, is read in place as
rows in blocks (FftParams' src_rpb / src_block) by every FFT path. Other
lengths multiply first (one binary pass) and take rfft's own path.

Checked against numpy.fft in float64 on the suite's device, in fft_shared's
own form and in the GPUs' form forced on the device (several rows a group,
swizzled slots), with the FFT suite's tolerance (tests/ops/test_fft.py):
per row, max |got - want| <= 1e-5 log2(N) |x w|_2 s.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import rlx
from rlx.errors import DTypeError, ShapeError
from rlx.opt.fusion import fuse
from rlx.reference import run_reference
from rlx.runtime.target import Target

from .helpers import force_gpu_fft_form, kernels_of

CAPS = Target.__dataclass_fields__["capabilities"].default
# n: fused (400 = 2 x 200 mixed radix, 512 and 8 powers of two); multiplied first (odd 401, 14 = 2 x 7
# Bluestein half, 4098 = 2 x 2049 past fft_shared).
LENGTHS = [8, 400, 512, 14, 401, 4098]


def _frames_graph(batch: int, length: int, n: int, hop: int, window_shape: tuple[int, ...], norm: str | None):
    g = rlx.Graph()
    x = g.input("x", (batch, length))
    frames = g.frames(x, n, hop)
    g.set_outputs(y=g.rfft(g.mul(frames, g.param("w", window_shape)), norm))
    return g


def _want(signal: np.ndarray, window: np.ndarray, n: int, hop: int, norm: str | None) -> np.ndarray:
    count = (signal.shape[-1] - n) // hop + 1
    index = np.arange(count)[:, None] * hop + np.arange(n)[None, :]
    windowed = signal.astype(np.float64)[:, index] * window.astype(np.float64).reshape(-1)
    return np.fft.rfft(windowed, axis=-1, norm=norm), np.linalg.norm(windowed, axis=-1).reshape(-1)


def _check(got, want, row_norms, n, norm, what):
    scale = {"backward": 1.0, None: 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[norm]
    err = np.abs(got.astype(np.complex128) - want).reshape(len(row_norms), -1).max(axis=-1)
    bound = 1e-5 * math.log2(max(n, 2)) * row_norms * scale
    assert (err <= bound).all(), f"{what}: max error over bound {np.max(err / np.maximum(bound, 1e-300)):.3g}"


@pytest.mark.parametrize("form", ["device", "gpu_form"])
@pytest.mark.parametrize("n", LENGTHS)
def test_windowed_frames_match_numpy(n, form, monkeypatch, rng):
    if form == "gpu_form":
        force_gpu_fft_form(monkeypatch, 3)
    hop = max(1, n // 3)
    for batch, window_shape, norm in ((1, (n,), None), (3, (1, n), "ortho"), (2, (1, 1, n), "forward")):
        length = n + 5 * hop + 3   # six frames and a tail no frame reads
        g = _frames_graph(batch, length, n, hop, window_shape, norm)
        signal = rng.standard_normal((batch, length)).astype(np.float32)
        window = rng.uniform(0.1, 1.0, window_shape).astype(np.float32)
        exe = rlx.compile(g, params={"w": window})
        kernels = kernels_of(exe)
        assert not any(k.startswith("copy") for k in kernels), kernels   # the frames are read in place
        if n in (8, 400, 512):   # the window in the load: one dispatch (400: the mixed form's, fft_mixed on GPUs)
            gpu_mixed = n == 400 and not exe.target.one_thread_groups
            assert kernels == ["fft_mixed_c64" if gpu_mixed else "fft_shared_c64"], kernels
        else:
            assert kernels[0] == "binary_f32" and kernels.count("binary_f32") == 1, kernels
        want, row_norms = _want(signal, window, n, hop, norm)
        _check(exe.run(x=signal)["y"].reshape(want.shape), want, row_norms, n, norm, f"N={n} B={batch} {form}")


@pytest.mark.parametrize("op", ["rfft", "fft"])
@pytest.mark.parametrize("n", [16, 400, 401, 4097])
def test_frames_are_read_in_place_as_rows_in_blocks(op, n, rng):
    """Without a window: a framing view of a batch feeds every FFT path
    (fft_shared, Stockham, Bluestein, rfft's halves) with no copy."""
    hop, batch = max(1, n // 4), 3
    length = n + 4 * hop + 1
    g = rlx.Graph()
    frames = g.frames(g.input("x", (batch, length)), n, hop)
    g.set_outputs(y=getattr(g, op)(frames))
    exe = rlx.compile(g)
    assert not any(k.startswith("copy") for k in kernels_of(exe)), kernels_of(exe)
    signal = rng.standard_normal((batch, length)).astype(np.float32)
    want, row_norms = _want(signal, np.ones(n, np.float32), n, hop, None)
    if op == "fft":
        count = (length - n) // hop + 1
        index = np.arange(count)[:, None] * hop + np.arange(n)[None, :]
        want = np.fft.fft(signal.astype(np.float64)[:, index], axis=-1)
    _check(exe.run(x=signal)["y"].reshape(want.shape), want, row_norms, n, None, f"{op} N={n}")


def _ops(graph) -> Counter:
    return Counter(node.op for node in graph.topo_order())


def test_fusion_fires_only_on_a_private_product_with_a_row_window():
    def graph(window_shape, product_is_output=False):
        g = rlx.Graph()
        frames = g.frames(g.input("x", (2, 100)), 16, 8)     # [2, 11, 16]
        product = g.mul(g.param("w", window_shape), frames)  # the window first: either order fuses
        outputs = {"y": g.rfft(product)}
        if product_is_output:
            outputs["p"] = product
        g.set_outputs(**outputs)
        return g

    assert _ops(fuse(graph((16,)), CAPS)[0])["windowed_rfft"] == 1
    assert _ops(fuse(graph((1, 1, 16)), CAPS)[0])["windowed_rfft"] == 1
    for g in (graph((11, 16)), graph((16,), product_is_output=True)):   # not one window for every row; read twice
        ops = _ops(fuse(g, CAPS)[0])
        assert ops["windowed_rfft"] == 0 and ops["rfft"] == 1 and ops["mul"] == 1
    assert _ops(fuse(graph((16,)), CAPS - {"windowed_rfft"})[0])["windowed_rfft"] == 0


def test_windowed_rfft_op_checks_and_reference(rng):
    g = rlx.Graph()
    x = g.input("x", (3, 10))
    with pytest.raises(ShapeError, match="window must be"):
        g.windowed_rfft(x, g.input("w", (9,)))
    with pytest.raises(ShapeError, match="window must be"):
        g.windowed_rfft(x, g.input("w2", (3, 10)))
    with pytest.raises(DTypeError, match="window must be f32"):
        g.windowed_rfft(x, g.input("w3", (10,), "f16"))
    g = rlx.Graph()   # the refused builds left their inputs in the first graph
    g.set_outputs(y=g.windowed_rfft(g.input("x", (3, 10)), g.input("w4", (10,)), "ortho"))
    xs, w = rng.standard_normal((3, 10)).astype(np.float32), rng.standard_normal(10).astype(np.float32)
    want = np.fft.rfft(xs.astype(np.float64) * w, norm="ortho")
    np.testing.assert_allclose(run_reference(g, {"x": xs, "w4": w})["y"], want, rtol=1e-6, atol=1e-6)   # c64 out
    got = rlx.compile(g).run(x=xs, w4=w)["y"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def _padded_graph(batch: int, length: int, pad: int, n: int, hop: int, window: bool, cat_is_output: bool = False):
    g = rlx.Graph()
    x = g.input("x", (batch, length))
    zeros = g.constant(np.zeros((batch, pad), np.float32))
    cat = g.concat([zeros, x, zeros], axis=-1)
    frames = g.frames(cat, n, hop)
    y = g.rfft(g.mul(frames, g.param("w", (n,))) if window else frames)
    g.set_outputs(**({"y": y, "cat": cat} if cat_is_output else {"y": y}))
    return g


@pytest.mark.parametrize("form", ["device", "gpu_form"])
@pytest.mark.parametrize("n, hop, pad, window", [
    (400, 160, 200, True),     # Whisper: the window and the padding in fft_shared's load
    (400, 160, 200, False),
    (16, 3, 20, True),         # more padding than a frame: whole frames of zeros
    (9, 4, 2, False),          # odd N: the full-length transform reads the padding
    (14, 5, 7, False),         # rfft_post after a Bluestein half length
    (512, 100, 1, True),
])
def test_zero_padded_frames_are_read_in_place(n, hop, pad, window, form, monkeypatch, rng):
    """frames(concat([zeros, x, zeros])) feeding an rfft: no thunk writes the
    padded signal (the load supplies the zeros), frames straddling either
    end and frames of zeros alone included, batches of signals."""
    if form == "gpu_form":
        force_gpu_fft_form(monkeypatch, 3)
    for batch in (1, 3):
        length = 3 * n + 5
        g = _padded_graph(batch, length, pad, n, hop, window)
        w = rng.uniform(0.2, 1.0, n).astype(np.float32) if window else np.ones(n, np.float32)
        exe = rlx.compile(g, params={"w": w} if window else None)
        kernels = kernels_of(exe)
        assert not any(k.startswith(("copy", "binary")) for k in kernels), kernels
        signal = rng.standard_normal((batch, length)).astype(np.float32)
        padded = np.pad(signal, ((0, 0), (pad, pad)))
        want, row_norms = _want(padded, w, n, hop, None)
        _check(exe.run(x=signal)["y"].reshape(want.shape), want, row_norms, n, None, f"N={n} pad={pad} B={batch}")


@pytest.mark.parametrize("form", ["device", "gpu_form"])
@pytest.mark.parametrize("n, hop, length", [(400, 160, 1601), (16, 5, 40), (10, 2, 12), (24, 7, 50),
                                            (9, 2, 12), (14, 3, 30)])
def test_reflect_padded_frames_are_read_in_place(n, hop, length, form, monkeypatch, rng):
    """rlx.signal's reflect centre padding (gathers of the signal's own
    samples at numpy.pad's mirrored indices) read by the load too where the
    window rides in fft_shared's load (even N, N / 2 in one dispatch; 9 and
    14 multiply first, so the padding is written): the stft's frames
    against numpy.pad(..., "reflect") in float64, batches of signals,
    frames mirrored at both ends."""
    from rlx import signal as rlx_signal

    if form == "gpu_form":
        force_gpu_fft_form(monkeypatch, 3)
    def compiled(batch, center):
        g = rlx.Graph()
        x = g.input("x", (batch, length))
        g.set_outputs(y=rlx_signal.stft(g, x, n_fft=n, hop_length=hop, window="hann", center=center,
                                        pad_mode="reflect"))
        return rlx.compile(g)

    for batch in (1, 3):
        exe = compiled(batch, True)
        # The padding costs no thunk: the same kernels as without centring (the
        # stft's [bins, frames] layout is its own copies).
        in_place = n not in (9, 14)
        assert (kernels_of(exe) == kernels_of(compiled(batch, False))) == in_place, kernels_of(exe)
        samples = rng.standard_normal((batch, length)).astype(np.float32)
        window = rlx_signal.get_window("hann", n)
        want, row_norms = _want(np.pad(samples, ((0, 0), (n // 2, n // 2)), mode="reflect"), window, n, hop, None)
        got = np.swapaxes(exe.run(x=samples)["y"], -1, -2)   # stft: [..., bins, frames]
        _check(got.reshape(want.shape), want, row_norms, n, None, f"reflect N={n} B={batch}")


def test_padding_read_elsewhere_is_written():
    """The padded signal is an output too: the concat runs, and the rfft
    reads the frames of its result."""
    g = _padded_graph(2, 50, 4, 8, 3, window=False, cat_is_output=True)
    exe = rlx.compile(g)
    assert kernels_of(exe).count("copy_f32_f32") >= 3   # the concat's three parts
    x = np.random.default_rng(1).standard_normal((2, 50)).astype(np.float32)
    got = exe.run(x=x)
    padded = np.pad(x, ((0, 0), (4, 4)))
    np.testing.assert_array_equal(got["cat"], padded)
    want, row_norms = _want(padded, np.ones(8, np.float32), 8, 3, None)
    _check(got["y"].reshape(want.shape), want, row_norms, 8, None, "padding read elsewhere")


def _power_graph(batch: int, length: int, n: int, hop: int, norm: str | None, pad: int = 0, spec_is_output=False):
    g = rlx.Graph()
    x = g.input("x", (batch, length))
    if pad:
        zeros = g.constant(np.zeros((batch, pad), np.float32))
        x = g.concat([zeros, x, zeros], axis=-1)
    spec = g.rfft(g.mul(g.frames(x, n, hop), g.param("w", (n,))), norm)
    re, im = g.real(spec), g.imag(spec)
    outputs = {"y": g.add(g.mul(re, re), g.mul(im, im))}
    if spec_is_output:
        outputs["spec"] = spec
    g.set_outputs(**outputs)
    return g


def test_power_fusion_fires_only_on_a_private_windowed_spectrum():
    """re^2 + im^2 of a windowed rfft that nothing else reads becomes
    windowed_rfft_power (either operand order of the add); a spectrum that
    is an output keeps its windowed_rfft, and the power its chain."""
    assert _ops(fuse(_power_graph(2, 100, 16, 8, None), CAPS)[0])["windowed_rfft_power"] == 1
    g = rlx.Graph()
    spec = g.windowed_rfft(g.frames(g.input("x", (2, 100)), 16, 8), g.param("w", (16,)))
    re, im = g.real(spec), g.imag(spec)
    g.set_outputs(y=g.add(g.mul(im, im), g.mul(re, re)))
    assert _ops(fuse(g, CAPS)[0])["windowed_rfft_power"] == 1
    ops = _ops(fuse(_power_graph(2, 100, 16, 8, None, spec_is_output=True), CAPS)[0])
    assert ops["windowed_rfft_power"] == 0 and ops["windowed_rfft"] == 1
    ops = _ops(fuse(_power_graph(2, 100, 16, 8, None), CAPS - {"windowed_rfft_power"})[0])
    assert ops["windowed_rfft_power"] == 0 and ops["windowed_rfft"] == 1


@pytest.mark.parametrize("form", ["device", "gpu_form"])
@pytest.mark.parametrize("n, hop, pad", [(400, 160, 200), (400, 160, 0), (512, 128, 256), (14, 5, 7), (401, 100, 0),
                                         (4098, 2000, 0), (8, 3, 0)])
def test_power_of_windowed_frames_matches_numpy(n, hop, pad, form, monkeypatch, rng):
    """windowed_rfft_power against numpy's |rfft(frames x window)|^2 in
    float64: the power written by the fused store where one dispatch covers
    N / 2 (400, 512, 8; with zero padding read in place), else by the
    general store after the full-length transform (14, 401, 4098), every
    norm; one dispatch and no copy of the padded signal where it fuses."""
    if form == "gpu_form":
        force_gpu_fft_form(monkeypatch, 3)
    for batch, norm in ((1, None), (3, "ortho"), (2, "forward")):
        length = 2 * n + 3 * hop + 1
        g = _power_graph(batch, length, n, hop, norm, pad)
        w = rng.uniform(0.2, 1.0, n).astype(np.float32)
        exe = rlx.compile(g, params={"w": w})
        kernels = kernels_of(exe)
        if n in (400, 512, 8):
            assert len(kernels) == 1 and kernels[0] in ("fft_shared_c64", "fft_mixed_c64"), kernels
        signal = rng.standard_normal((batch, length)).astype(np.float32)
        spec, row_norms = _want(np.pad(signal, ((0, 0), (pad, pad))), w, n, hop, norm)
        want = np.abs(spec) ** 2
        got = exe.run(x=signal)["y"].reshape(want.shape).astype(np.float64)
        scale = {"backward": 1.0, None: 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[norm]
        # |a|^2 - |b|^2 = (|a| - |b|)(|a| + |b|): the FFT's bound times twice the bin's magnitude
        fft_bound = 1e-5 * math.log2(n) * row_norms[:, None] * scale
        bound = fft_bound * (2 * np.abs(spec).reshape(len(row_norms), -1) + fft_bound)
        err = np.abs(got - want).reshape(len(row_norms), -1)
        assert (err <= bound).all(), f"N={n} B={batch} {norm}: {np.max(err / np.maximum(bound, 1e-300)):.3g}"
