"""Audio front ends as graphs: the short-time Fourier transform, its inverse,
the mel filterbank and the log-mel spectrogram, with librosa's conventions.

The conventions are librosa's (0.11: ``librosa.stft``, ``librosa.istft``,
``librosa.filters.mel``, ``librosa.feature.melspectrogram``,
``librosa.power_to_db``), so a model trained on librosa features gets the
same numbers:

- the window is periodic (``scipy.signal.get_window(..., fftbins=True)``),
  ``win_length`` samples long (default ``n_fft``) and zero-padded on both
  sides to ``n_fft``; ``hop_length`` defaults to ``win_length // 4``;
- ``center=True`` pads the signal by ``n_fft // 2`` on both sides
  (``pad_mode`` "constant": zeros, librosa's default; or "reflect") so
  frame t is centred on sample ``t * hop_length``;
- the result is ``[..., n_fft // 2 + 1, n_frames]`` (frequency, then frames
  along the last axis), c64, unnormalized (numpy's "backward" rfft);
- any leading axes are a batch of signals.

Every function here that takes a ``Graph`` builds nodes and returns them;
framing is the ``frames`` strided view (``Graph.frames``) and padding,
overlap-add and the filterbank are constants, concats, gathers and a
matmul fixed at build time, so a compiled executable replays with no Python
per frame. ``stft_array``, ``istft_array`` and ``log_mel_spectrogram_array``
are the eager forms for numpy arrays: each compiles the graph for the input's
shape once and keeps the executable (``clear_cache`` drops them).

Computation is in f32 (librosa computes the transform in float64 and rounds
to complex64): compared with librosa, values agree to f32 rounding relative
to the spectrum's largest magnitude (tests/test_signal.py states the
tolerances).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from rlx.arg_types import is_integer, is_real
from rlx.errors import GraphError, InputError, ShapeError
from rlx.ir.graph import Graph, Node
from rlx.ir.shape import MAX_ELEMENTS, check_extent

__all__ = ["clear_cache", "get_window", "hz_to_mel", "istft", "istft_array", "log_mel_spectrogram",
           "log_mel_spectrogram_array", "mel_filterbank", "mel_frequencies", "mel_to_hz", "power_to_db",
           "stft", "stft_array"]

PadMode = Literal["constant", "reflect"]
WindowSpec = str | tuple | Sequence[float] | np.ndarray


def _int_arg(what: str, name: str, value: object) -> int:
    """An integer argument (numpy's included, bool not) as an int; else a
    GraphError naming it. Every such argument is a length, so one beyond
    MAX_ELEMENTS (no tensor can span it) is refused here, before numpy
    would try to allocate it."""
    if not is_integer(value):
        raise GraphError(f"{what}: {name} must be an integer, got {value!r}")
    if abs(value) > MAX_ELEMENTS:
        raise GraphError(f"{what}: {name} = {value} is longer than any tensor (rlx.ir.shape.MAX_ELEMENTS = "
                         f"{MAX_ELEMENTS})")
    return int(value)


def _real_arg(what: str, name: str, value: object) -> float:
    """A finite real argument (numpy's included, bool not) as a float; else a GraphError naming it."""
    if not is_real(value):
        raise GraphError(f"{what}: {name} must be a finite number, got {value!r}")
    return float(value)


# ---------------------------------------------------------------- numpy helpers (build time)


# scipy.signal's generalized cosine windows: w[k] = sum_j (-1)^j a_j cos(2 pi j k / M).
_COSINE_WINDOWS = {"hann": (0.5, 0.5), "hanning": (0.5, 0.5), "hamming": (0.54, 0.46),
                   "blackman": (0.42, 0.5, 0.08)}
_FLAT_WINDOWS = ("ones", "boxcar", "box", "rectangular")
_PARAMETRIC_WINDOWS = ("kaiser", "gaussian")
_WINDOW_NAMES = "'hann', 'hamming', 'blackman', 'bartlett', 'ones', ('kaiser', beta), ('gaussian', std)"


def _named_window(window: str | tuple, win_length: int) -> np.ndarray:
    """scipy.signal.get_window(window, win_length, fftbins=True) for the
    windows named in _WINDOW_NAMES: the periodic window is the symmetric one
    of win_length + 1 samples without its last, and one sample is [1]."""
    name, *args = (window,) if isinstance(window, str) else window
    if name not in (*_COSINE_WINDOWS, *_FLAT_WINDOWS, "bartlett", *_PARAMETRIC_WINDOWS):
        raise GraphError(f"window: unknown window {name!r}; use {_WINDOW_NAMES} or an array")
    wanted = 1 if name in _PARAMETRIC_WINDOWS else 0
    if len(args) != wanted:
        takes = f"one parameter: ('{name}', value)" if wanted else "no parameter"
        raise GraphError(f"window: {name!r} takes {takes}; got {window!r}")
    param = _real_arg("window", f"the {name} window's parameter", args[0]) if args else 0.0
    if win_length == 1:
        return np.ones(1)
    k = np.arange(win_length, dtype=np.float64)
    if name in _COSINE_WINDOWS:
        coeffs = _COSINE_WINDOWS[name]
        return sum((-1) ** j * a * np.cos(2.0 * np.pi * j * k / win_length) for j, a in enumerate(coeffs))
    if name in _FLAT_WINDOWS:
        return np.ones(win_length)
    if name == "bartlett":
        return np.bartlett(win_length + 1)[:-1]
    if name == "kaiser":
        return np.kaiser(win_length + 1, param)[:-1]
    if param <= 0:
        raise GraphError(f"window: the gaussian window's std must be > 0, got {param}")
    return np.exp(-0.5 * ((k - win_length / 2.0) / param) ** 2)


def get_window(window: WindowSpec, win_length: int, n_fft: int | None = None) -> np.ndarray:
    """The analysis window as float64 [n_fft]: a periodic window of
    ``win_length`` samples (a name, or a (name, parameter) tuple, as
    scipy.signal.get_window takes them: "hann", "hamming", "blackman",
    "bartlett", "ones"/"boxcar"/"rectangular", ("kaiser", beta),
    ("gaussian", std); or the samples themselves, of length
    ``win_length``), zero-padded in the centre of ``n_fft`` (default
    ``win_length``) as librosa's ``get_window(..., fftbins=True)`` +
    ``util.pad_center``."""
    win_length = _int_arg("window", "win_length", win_length)
    n_fft = win_length if n_fft is None else _int_arg("window", "n_fft", n_fft)
    if not 1 <= win_length <= n_fft:
        raise GraphError(f"window: win_length must be in [1, n_fft = {n_fft}], got {win_length}")
    if isinstance(window, str) or (isinstance(window, tuple) and window and isinstance(window[0], str)):
        w = _named_window(window, win_length)
    else:
        try:
            w = np.asarray(window, dtype=np.float64)
        except (TypeError, ValueError):
            raise GraphError(f"window: {window!r} is neither a window name ({_WINDOW_NAMES}) nor its "
                             "samples") from None
        if w.shape != (win_length,):
            raise ShapeError(f"window: an array window must have shape ({win_length},), got {w.shape}")
    left = (n_fft - win_length) // 2
    return np.pad(w, (left, n_fft - win_length - left))


def hz_to_mel(frequencies: np.ndarray | float, htk: bool = False) -> np.ndarray:
    """Hz to mels, as librosa.hz_to_mel: the Slaney scale (linear below
    1 kHz, logarithmic above) or with ``htk`` 2595 log10(1 + f / 700)."""
    f = np.asarray(frequencies, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    mels = f / f_sp
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, min_log_hz) / min_log_hz) / logstep, mels)


def mel_to_hz(mels: np.ndarray | float, htk: bool = False) -> np.ndarray:
    """Mels to Hz, the inverse of ``hz_to_mel`` (librosa.mel_to_hz)."""
    m = np.asarray(mels, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_frequencies(n_mels: int = 128, fmin: float = 0.0, fmax: float = 11025.0, htk: bool = False) -> np.ndarray:
    """``n_mels`` frequencies (Hz) evenly spaced in mels (librosa.mel_frequencies)."""
    return mel_to_hz(np.linspace(hz_to_mel(fmin, htk), hz_to_mel(fmax, htk), n_mels), htk)


def mel_filterbank(sr: float, n_fft: int, n_mels: int = 128, fmin: float = 0.0, fmax: float | None = None,
                   htk: bool = False, norm: Literal["slaney"] | None = "slaney",
                   dtype: type | np.dtype = np.float32) -> np.ndarray:
    """The mel filterbank [n_mels, n_fft // 2 + 1] exactly as
    ``librosa.filters.mel`` computes it with the same arguments (its
    defaults: Slaney mel scale, ``norm="slaney"``: each triangle divided by
    its width in Hz / 2, so filters have equal area): triangles between
    ``n_mels + 2`` mel-spaced edges over the rfft bin frequencies."""
    sr = _real_arg("mel_filterbank", "sr", sr)
    if sr <= 0:
        raise GraphError(f"mel_filterbank: sr must be > 0, got {sr}")
    fmin = _real_arg("mel_filterbank", "fmin", fmin)
    fmax = sr / 2 if fmax is None else _real_arg("mel_filterbank", "fmax", fmax)
    if norm not in ("slaney", None):
        raise GraphError(f"mel_filterbank: norm must be 'slaney' or None, got {norm!r}")
    n_mels = _int_arg("mel_filterbank", "n_mels", n_mels)
    n_fft = _int_arg("mel_filterbank", "n_fft", n_fft)
    if n_mels < 1 or n_fft < 1:
        raise GraphError(f"mel_filterbank: n_mels and n_fft must be >= 1, got {n_mels} and {n_fft}")
    try:
        check_extent((n_mels, 1 + n_fft // 2))
    except ShapeError as e:
        raise GraphError(f"mel_filterbank: the filterbank [n_mels, n_fft // 2 + 1] is too large: {e}") from None
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=dtype)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = mel_frequencies(n_mels + 2, fmin=fmin, fmax=fmax, htk=htk)
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):     # librosa's order of operations and roundings, for equal results
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    if norm == "slaney":
        weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, np.newaxis]
    return weights


def window_sumsquare(window: WindowSpec, n_frames: int, hop_length: int, win_length: int, n_fft: int) -> np.ndarray:
    """Sum of the squared, hop-shifted windows over n_fft + hop (n_frames - 1)
    samples: the overlap-add envelope istft divides by
    (librosa.filters.window_sumsquare, norm=None)."""
    win_sq = get_window(window, win_length, n_fft) ** 2
    out = np.zeros(n_fft + hop_length * (n_frames - 1))
    for t in range(n_frames):
        out[t * hop_length:t * hop_length + n_fft] += win_sq
    return out


# ---------------------------------------------------------------- graph builders


def _lead(x: Node, what: str, min_rank: int) -> tuple[int, ...]:
    if len(x.shape) < min_rank:
        raise ShapeError(f"{what}: input must have rank >= {min_rank}, got {x.shape!r}")
    return tuple(x.shape[:len(x.shape) - min_rank])


def _hop(hop_length: int | None, win_length: int) -> int:
    hop = win_length // 4 if hop_length is None else _int_arg("stft / istft", "hop_length", hop_length)
    if hop < 1:
        raise GraphError(f"hop_length must be >= 1, got {hop} (the default is win_length // 4)")
    return hop


def _zeros(g: Graph, shape: tuple[int, ...]) -> Node:
    return g.constant(np.zeros(shape, np.float32))


def _pad_signal(g: Graph, x: Node, pad: int, mode: str) -> Node:
    """x [B, L] padded by ``pad`` samples on both sides as numpy.pad does:
    zeros ("constant") or mirrored about the end samples ("reflect",
    repeated reflections included; one sample repeats, as numpy has it),
    the reflected samples gathered with constant indices."""
    b, length = x.shape
    if pad == 0:
        return x
    if mode == "constant":
        return g.concat([_zeros(g, (b, pad)), x, _zeros(g, (b, pad))], axis=-1)
    if mode != "reflect":
        raise GraphError(f"pad_mode must be 'constant' or 'reflect', got {mode!r}")
    src = np.pad(np.arange(length), pad, mode="reflect")
    rows = np.arange(b)[:, None] * length
    table = g.reshape(x, (b * length, 1))
    parts = []
    for idx in (src[:pad], src[-pad:]):
        gathered = g.gather(table, g.constant((rows + idx[None, :]).astype(np.int32)))
        parts.append(g.reshape(gathered, (b, pad)))
    return g.concat([parts[0], x, parts[1]], axis=-1)


def _frames_spectrum(g: Graph, x: Node, n_fft: int, hop_length: int | None, win_length: int | None,
                     window: WindowSpec, center: bool, pad_mode: str, what: str) -> tuple[Node, tuple[int, ...]]:
    """rfft of the windowed frames: c64 [B, n_frames, n_fft // 2 + 1] and the leading shape."""
    lead = _lead(x, what, 1)
    n_fft = _int_arg(what, "n_fft", n_fft)
    if n_fft < 1:
        raise GraphError(f"{what}: n_fft must be >= 1, got {n_fft}")
    win_length = n_fft if win_length is None else _int_arg(what, "win_length", win_length)
    hop = _hop(hop_length, win_length)
    length = x.shape[-1]
    b = math.prod(lead)
    sig = g.reshape(x, (b, length))
    if center:
        sig = _pad_signal(g, sig, n_fft // 2, pad_mode)
    if sig.shape[-1] < n_fft:
        raise ShapeError(f"{what}: the signal ({length} samples{', padded to ' + str(sig.shape[-1]) if center else ''})"
                         f" is shorter than n_fft = {n_fft}")
    frames = g.frames(sig, n_fft, hop)                                    # [B, T, n_fft], a strided view
    win = g.constant(get_window(window, win_length, n_fft).astype(np.float32))
    return g.rfft(g.mul(frames, win)), lead


def stft(g: Graph, x: Node, n_fft: int = 2048, hop_length: int | None = None, win_length: int | None = None,
         window: WindowSpec = "hann", center: bool = True, pad_mode: PadMode = "constant") -> Node:
    """The short-time Fourier transform of real f32 signals x [..., L]:
    c64 [..., n_fft // 2 + 1, n_frames], librosa.stft's conventions (module
    docstring): periodic window, ``center`` padding by ``n_fft // 2``,
    n_frames = 1 + (L' - n_fft) // hop_length for the (padded) length L'."""
    spec, lead = _frames_spectrum(g, x, n_fft, hop_length, win_length, window, center, pad_mode, "stft")
    b, t, f = spec.shape
    # Movement ops take no c64: the parts move as f32 and are packed again.
    re, im = (g.reshape(g.transpose(part, (0, 2, 1)), lead + (f, t)) for part in (g.real(spec), g.imag(spec)))
    return g.complex(re, im)


def istft(g: Graph, s: Node, hop_length: int | None = None, win_length: int | None = None, n_fft: int | None = None,
          window: WindowSpec = "hann", center: bool = True, length: int | None = None) -> Node:
    """The inverse of ``stft`` for c64 s [..., n_fft // 2 + 1, n_frames]:
    f32 [..., length] by librosa.istft's rule: each frame's irfft times the
    window, overlap-added, divided by the summed squared windows where that
    sum exceeds the smallest f32 normal, the ``center`` padding cut off;
    without ``length`` the signal has n_fft + hop (n_frames - 1) samples
    (less 2 (n_fft // 2) with ``center``), with it exactly ``length``
    (zero-padded beyond the frames). n_fft defaults to 2 (bins - 1)."""
    lead = _lead(s, "istft", 2)
    n_bins, n_frames = s.shape[-2], s.shape[-1]
    n_fft = 2 * (n_bins - 1) if n_fft is None else _int_arg("istft", "n_fft", n_fft)
    if n_fft < 1:
        raise GraphError(f"istft: n_fft must be >= 1, got {n_fft}")
    win_length = n_fft if win_length is None else _int_arg("istft", "win_length", win_length)
    hop = _hop(hop_length, win_length)
    pad = n_fft // 2 if center else 0
    if length is not None:
        length = _int_arg("istft", "length", length)
        n_frames = min(n_frames, int(np.ceil((length + 2 * pad) / hop)))
    if n_frames < 1:
        raise ShapeError(f"istft: no frames to invert (input {s.shape!r}, length {length})")
    b = math.prod(lead)
    parts = []
    for part in (g.real(s), g.imag(s)):     # movement ops take no c64: the parts move as f32
        part = g.reshape(part, (b, n_bins, s.shape[-1]))
        if n_frames < s.shape[-1]:
            part = g.narrow(part, 2, 0, n_frames)
        parts.append(g.transpose(part, (0, 2, 1)))
    frames = g.irfft(g.complex(*parts), n=n_fft)                             # [B, T, n_fft]
    win = get_window(window, win_length, n_fft)
    frames = g.mul(frames, g.constant(win.astype(np.float32)))

    # Overlap-add without a scatter: a frame spans r_max hop-long chunks;
    # chunk r of frame t lands at chunk t + r of the signal, so the sum of
    # r_max copies of the frames' r-th chunks, shifted by r, is the signal.
    r_max = -(-n_fft // hop)
    if r_max * hop > n_fft:
        frames = g.concat([frames, _zeros(g, (b, n_frames, r_max * hop - n_fft))], axis=-1)
    chunks = g.reshape(frames, (b, n_frames, r_max, hop))
    total: Node | None = None
    for r in range(r_max):
        chunk = g.reshape(g.narrow(chunks, 2, r, 1), (b, n_frames, hop))
        parts = ([_zeros(g, (b, r, hop))] if r else []) + [chunk] + (
            [_zeros(g, (b, r_max - 1 - r, hop))] if r < r_max - 1 else [])
        shifted = g.concat(parts, axis=1) if len(parts) > 1 else chunk
        total = shifted if total is None else g.add(total, shifted)
    assert total is not None
    full = (n_frames + r_max - 1) * hop
    y = g.reshape(total, (b, full))

    out_len = (n_fft + hop * (n_frames - 1) - 2 * pad) if length is None else length
    avail = max(0, min(out_len, full - pad))
    y = g.narrow(y, 1, pad, avail)   # empty where the frames give no sample (one centred frame)
    if out_len > avail:
        tail = _zeros(g, (b, out_len - avail))
        y = g.concat([y, tail], axis=1) if avail else tail
    env = window_sumsquare(window, n_frames, hop, win_length, n_fft)[pad:pad + out_len]
    env = np.pad(env, (0, out_len - env.shape[0]))
    tiny = np.finfo(np.float32).tiny
    scale = np.where(env > tiny, 1.0 / np.where(env > tiny, env, 1.0), 1.0).astype(np.float32)
    return g.reshape(g.mul(y, g.constant(scale)), lead + (out_len,))


def power_to_db(g: Graph, s: Node, ref: float | str = 1.0, amin: float = 1e-10, top_db: float | None = None,
                axes: Literal["auto"] | int | Sequence[int] | None = "auto") -> Node:
    """librosa.power_to_db (librosa >= 1.0): 10 log10(max(amin, S)) -
    10 log10(max(amin, ref)), then, with ``top_db``, floored at the peak
    minus top_db. ``ref`` is a number, or ``"max"`` (librosa's
    ``ref=np.max``: the peak of S). The peak is taken over ``axes``:
    ``"auto"`` the last two (each spectrogram of a batch on its own, so a
    clip's result never depends on the clips batched with it; the last
    axis of a 1-D S), ``None`` the whole tensor (librosa < 1.0, which took
    the batch's peak), or the given axes. librosa's own default is
    top_db=80; here it is None (no floor)."""
    amin = _real_arg("power_to_db", "amin", amin)
    if amin <= 0:
        raise GraphError(f"power_to_db: amin must be > 0, got {amin}")
    if top_db is not None:
        top_db = _real_arg("power_to_db", "top_db", top_db)
        if top_db < 0:
            raise GraphError(f"power_to_db: top_db must be >= 0, got {top_db}")
    peak_axes = _peak_axes(len(s.shape), axes)
    by_max = isinstance(ref, str) and ref == "max"
    if not by_max:
        ref = abs(_real_arg("power_to_db", "ref (a number or 'max')", ref))
    ln = g.log(g.maximum(s, g.constant(np.float32(amin))))
    db = g.scale_shift(ln, 10.0 / math.log(10.0), 0.0 if by_max else -10.0 * math.log10(max(amin, ref)))
    if by_max:
        db = g.sub(db, _peak(g, db, peak_axes))
    if top_db is None:
        return db
    return g.maximum(db, g.scale_shift(_peak(g, db, peak_axes), 1.0, -top_db))


def _peak_axes(rank: int, axes: object) -> tuple[int, ...]:
    """power_to_db's ``axes`` as sorted non-negative axes of a rank-``rank`` tensor."""
    if isinstance(axes, str) and axes == "auto":
        return tuple(range(max(rank - 2, 0), rank))
    if axes is None:
        return tuple(range(rank))
    listed = [axes] if is_integer(axes) else axes
    if not isinstance(listed, Sequence) or isinstance(listed, str) or not all(is_integer(a) for a in listed):
        raise GraphError(f"power_to_db: axes must be 'auto', None, an axis or a sequence of axes, got {axes!r}")
    out = sorted({int(a) + rank if -rank <= a < 0 else int(a) for a in listed})
    if not out or out[0] < 0 or out[-1] >= rank or len(out) != len(listed):
        raise GraphError(f"power_to_db: axes {axes!r} are not distinct axes of a rank-{rank} tensor")
    return tuple(out)


def _peak(g: Graph, x: Node, axes: tuple[int, ...]) -> Node:
    """The maximum of x over ``axes``, shaped to broadcast against x (those axes kept as 1)."""
    shape = tuple(x.shape)
    kept = [a for a in range(len(shape)) if a not in axes]
    moved = x if kept + list(axes) == list(range(len(shape))) else g.transpose(x, kept + list(axes))
    span = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    flat = g.reshape(moved, tuple(shape[a] for a in kept) + (span,))
    peak = g.max(flat, axis=-1, keepdims=True)
    return g.reshape(peak, tuple(1 if a in axes else shape[a] for a in range(len(shape))))


def log_mel_spectrogram(g: Graph, x: Node, sr: float = 22050, n_fft: int = 2048, hop_length: int | None = None,
                        win_length: int | None = None, window: WindowSpec = "hann", center: bool = True,
                        pad_mode: PadMode = "constant", power: float = 2.0, n_mels: int = 128, fmin: float = 0.0,
                        fmax: float | None = None, htk: bool = False, norm: Literal["slaney"] | None = "slaney",
                        log: Literal["db", "ln"] = "db", ref: float | str = 1.0, amin: float = 1e-10,
                        top_db: float | None = None) -> Node:
    """Log-mel spectrogram of real f32 signals x [..., L]: f32 [..., n_mels,
    n_frames], librosa's conventions: ``librosa.power_to_db(
    librosa.feature.melspectrogram(y=x, sr=sr, n_fft=n_fft, ...), ref=ref,
    amin=amin, top_db=top_db)`` (``ref="max"`` for librosa's ``ref=np.max``;
    the peak that ``ref="max"`` and ``top_db`` use is each signal's own, as
    librosa >= 1.0 takes it). The graph frames the signal (a strided
    view), windows it, takes the rfft, the power re^2 + im^2 (|X| with
    ``power=1``), multiplies by the mel filterbank (``mel_filterbank``,
    computed in numpy at build time) and takes 10 log10(max(amin, S)) (dB,
    ``log="db"``) or ln(max(amin, S)) (``log="ln"``; ref and top_db apply
    to dB only)."""
    if power not in (1.0, 2.0):
        raise GraphError(f"log_mel_spectrogram: power must be 1 (magnitude) or 2 (power), got {power}")
    if log not in ("db", "ln"):
        raise GraphError(f"log_mel_spectrogram: log must be 'db' or 'ln', got {log!r}")
    spec, lead = _frames_spectrum(g, x, n_fft, hop_length, win_length, window, center, pad_mode,
                                  "log_mel_spectrogram")
    re, im = g.real(spec), g.imag(spec)
    s = g.add(g.mul(re, re), g.mul(im, im))                                 # [B, T, bins]
    if power == 1.0:
        s = g.sqrt(s)
    fb = mel_filterbank(sr, int(n_fft), n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm)
    mel = g.linear(s, g.constant(fb))                                       # [B, T, n_mels]
    # Transposed before the log: its elementwise pass reads the strided view and
    # writes the output's own layout, where a pass after it would be a copy.
    mel = g.transpose(mel, (0, 2, 1))                                       # [B, n_mels, T]
    if log == "db":
        out = power_to_db(g, mel, ref=ref, amin=amin, top_db=top_db)
    else:
        out = g.log(g.maximum(mel, g.constant(np.float32(amin))))
    b, m, t = out.shape
    return g.reshape(out, lead + (m, t))


# ---------------------------------------------------------------- eager forms (numpy in, numpy out)

_EXECUTABLES: dict[tuple, Any] = {}


def clear_cache() -> None:
    """Drop the executables the eager functions compiled."""
    _EXECUTABLES.clear()


def _key_part(v: Any) -> Any:
    if isinstance(v, np.ndarray) or (isinstance(v, Sequence) and not isinstance(v, str)):
        try:
            a = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):   # not samples: a (name, parameter) window, or what the build rejects
            return ("spec", repr(v))
        return ("array", a.shape, a.tobytes())
    return v


def _array_arg(what: str, value: object, dtype: type) -> np.ndarray:
    """``value`` as a contiguous array of ``dtype``; an InputError where numpy cannot convert it."""
    try:
        return np.ascontiguousarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what}: the input cannot be read as {np.dtype(dtype).name} ({e})") from None


def _run(kind: str, build, value: np.ndarray, dtype: str, device: str | None, **kw: Any) -> np.ndarray:
    from rlx.api import compile as compile_graph  # on first use: rlx.signal's graph builders need no runtime

    key = (kind, value.shape, device) + tuple((k, _key_part(v)) for k, v in sorted(kw.items()))
    exe = _EXECUTABLES.get(key)
    if exe is None:
        g = Graph()
        g.set_outputs(y=build(g, g.input("x", value.shape, dtype), **kw))
        exe = _EXECUTABLES[key] = compile_graph(g, device=device)
    return exe.run(x=value)["y"]


def stft_array(y: np.ndarray, n_fft: int = 2048, hop_length: int | None = None, win_length: int | None = None,
               window: WindowSpec = "hann", center: bool = True, pad_mode: PadMode = "constant",
               device: str | None = None) -> np.ndarray:
    """``stft`` of a numpy signal (float32 [..., L]; other real dtypes are
    converted): complex64 [..., n_fft // 2 + 1, n_frames], as librosa.stft.
    Compiled once per shape and arguments, then replayed."""
    y = _array_arg("stft_array", y, np.float32)
    return _run("stft", stft, y, "f32", device, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                window=window, center=center, pad_mode=pad_mode)


def istft_array(s: np.ndarray, hop_length: int | None = None, win_length: int | None = None,
                n_fft: int | None = None, window: WindowSpec = "hann", center: bool = True,
                length: int | None = None, device: str | None = None) -> np.ndarray:
    """``istft`` of a numpy spectrogram (complex [..., bins, frames]):
    float32 [..., length], as librosa.istft. Compiled once per shape and
    arguments, then replayed."""
    s = _array_arg("istft_array", s, np.complex64)
    return _run("istft", istft, s, "c64", device, hop_length=hop_length, win_length=win_length, n_fft=n_fft,
                window=window, center=center, length=length)


def log_mel_spectrogram_array(y: np.ndarray, sr: float = 22050, n_fft: int = 2048, hop_length: int | None = None,
                              win_length: int | None = None, window: WindowSpec = "hann", center: bool = True,
                              pad_mode: PadMode = "constant", power: float = 2.0, n_mels: int = 128,
                              fmin: float = 0.0, fmax: float | None = None, htk: bool = False,
                              norm: Literal["slaney"] | None = "slaney", log: Literal["db", "ln"] = "db",
                              ref: float | str = 1.0, amin: float = 1e-10, top_db: float | None = None,
                              device: str | None = None) -> np.ndarray:
    """``log_mel_spectrogram`` of a numpy signal (float32 [..., L]):
    float32 [..., n_mels, n_frames], as librosa.power_to_db(
    librosa.feature.melspectrogram(...)). Compiled once per shape and
    arguments, then replayed."""
    y = _array_arg("log_mel_spectrogram_array", y, np.float32)
    return _run("log_mel", log_mel_spectrogram, y, "f32", device, sr=sr, n_fft=n_fft, hop_length=hop_length,
                win_length=win_length, window=window, center=center, pad_mode=pad_mode, power=power,
                n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm, log=log, ref=ref, amin=amin,
                top_db=top_db)
