"""FFT: discrete Fourier transforms along the last axis, and the ops that
move data between real tensors and the complex dtype c64.

fft(x, norm), ifft(x, norm): c64 [..., N] -> c64 [..., N] (a real f32 x
  is promoted: its imaginary parts are zero).
rfft(x, norm): f32 [..., N] -> c64 [..., N // 2 + 1], the non-negative
  frequencies of a real signal.
windowed_rfft(x, window, norm): rfft(x * window) for an f32 window [N]
  (leading dimensions of one allowed) over every row: fusion's form of
  rfft(mul(frames, window)) (rlx/opt/fusion.py), whose window the FFT's load
  applies.
windowed_rfft_power(x, window, norm): f32 [..., N // 2 + 1], the power
  |windowed_rfft(x, window, norm)|^2 of each bin: fusion's form of
  real(X)^2 + imag(X)^2 of a windowed rfft X read by nothing else (a
  spectrogram's power), whose FFT store writes the power itself.
irfft(x, n, norm): c64 [..., M] -> f32 [..., n], the real signal whose
  half spectrum x is (numpy's rules: x is cut or zero-padded to n // 2 + 1
  bins, the imaginary parts of bin 0 and, for even n, bin n / 2 are
  ignored; n defaults to 2 (M - 1)).
norm: numpy.fft's "backward" (default; None means it), "ortho" or
  "forward": which direction is scaled by 1 / N (or both by 1 / sqrt N).
real(x), imag(x): c64 -> f32, strided views of the parts (no copy).
complex(re, im): two f32 of one shape -> c64.

Every N >= 1 runs; the lowering (rlx/lowering/fft.py) picks the algorithm.
"""

from __future__ import annotations

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.dtype import c64, f32
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _int, _reg

NORMS = ("backward", "ortho", "forward")

# The ops that take or make c64; rlx.ir.graph refuses it everywhere else.
COMPLEX_OPS = frozenset({"fft", "ifft", "rfft", "windowed_rfft", "irfft", "real", "imag", "complex", "input", "param",
                         "constant"})


def check_complex_operands(op: str, types: list[TensorType]) -> None:
    """Refuse a c64 input to any op outside COMPLEX_OPS (an elementwise op
    would otherwise read the pairs as floats)."""
    if op in COMPLEX_OPS:
        return
    for i, t in enumerate(types):
        if t.dtype.is_complex:
            raise DTypeError(f"{op}: input {i} is {t.dtype} (complex), which only the FFT family accepts "
                             f"({', '.join(sorted(COMPLEX_OPS - {'input', 'param', 'constant'}))}); take "
                             "g.real(x) / g.imag(x) first")


def _norm(op: str, attrs: dict) -> None:
    norm = attrs["norm"]
    if norm is None:
        norm = attrs["norm"] = "backward"
    if norm not in NORMS:
        raise GraphError(f"{op}: norm must be one of {', '.join(NORMS)} or None, got {norm!r}")


def _last_axis(op: str, x: TensorType) -> int:
    if x.rank < 1:
        raise ShapeError(f"{op}: needs a signal along the last axis, got a scalar {x}")
    if x.shape[-1] < 1:
        raise ShapeError(f"{op}: the last axis of {x.shape!r} is empty; a transform needs N >= 1 points")
    return x.shape[-1]


def _infer_c2c(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"norm": None})
        _norm(op, attrs)
        (x,) = types
        if x.dtype not in (c64, f32):
            raise DTypeError(f"{op}: input must be c64 (or f32, promoted to complex), got {x}")
        _last_axis(op, x)
        return TensorType(x.shape, c64)
    return infer


def _infer_rfft(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("rfft", attrs, {"norm": None})
    _norm("rfft", attrs)
    (x,) = types
    if x.dtype != f32:
        raise DTypeError(f"rfft: input must be a real f32 signal, got {x}"
                         + (" (use fft for complex input)" if x.dtype == c64 else ""))
    n = _last_axis("rfft", x)
    return TensorType(tuple(x.shape[:-1]) + (n // 2 + 1,), c64)


def _infer_windowed_rfft(types: list[TensorType], attrs: dict) -> TensorType:
    x, window = types
    out = _infer_rfft([x], attrs)
    n = x.shape[-1]
    if window.dtype != f32:
        raise DTypeError(f"windowed_rfft: the window must be f32, got {window}")
    if window.rank < 1 or window.shape[-1] != n or any(d != 1 for d in window.shape[:-1]):
        raise ShapeError(f"windowed_rfft: the window must be [{n}] (leading dimensions of one allowed) for a "
                         f"signal of {n} points, got {window.shape!r}")
    return out


def _infer_windowed_rfft_power(types: list[TensorType], attrs: dict) -> TensorType:
    return TensorType(_infer_windowed_rfft(types, attrs).shape, f32)


def _infer_irfft(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("irfft", attrs, {"n": None, "norm": None})
    _norm("irfft", attrs)
    (x,) = types
    if x.dtype != c64:
        raise DTypeError(f"irfft: input must be a c64 half spectrum, got {x}")
    m = _last_axis("irfft", x)
    n = attrs["n"]
    n = attrs["n"] = 2 * (m - 1) if n is None else _int("irfft", "n", n)
    if n < 1:
        raise GraphError(f"irfft: the output length n must be >= 1, got {n} (the default is 2 (M - 1), "
                         f"M = {m})")
    return TensorType(tuple(x.shape[:-1]) + (n,), f32)


def _infer_part(op: str):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {})
        (x,) = types
        if x.dtype != c64:
            raise DTypeError(f"{op}: input must be c64, got {x}")
        return TensorType(x.shape, f32)
    return infer


def _infer_complex(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("complex", attrs, {})
    re, im = types
    if re.dtype != f32 or im.dtype != f32:
        raise DTypeError(f"complex: real and imaginary parts must be f32, got {re} and {im}")
    if tuple(re.shape) != tuple(im.shape):
        raise ShapeError(f"complex: the parts must have one shape, got {re.shape!r} and {im.shape!r}")
    return TensorType(re.shape, c64)


# precision="f32": the kernels compute in f32 only, so under an f16 policy
# the real inputs are cast back to f32 (rlx/opt/precision.py) and c64 stays.
OPS: tuple[OpDef, ...] = (
    _reg("fft", 1, _infer_c2c("fft"), "Discrete Fourier transform along the last axis (c64, or f32 promoted).",
         precision="f32"),
    _reg("ifft", 1, _infer_c2c("ifft"), "Inverse discrete Fourier transform along the last axis.",
         precision="f32"),
    _reg("rfft", 1, _infer_rfft, "Fourier transform of a real f32 signal: the N // 2 + 1 non-negative "
         "frequencies (c64).", precision="f32"),
    _reg("windowed_rfft", 2, _infer_windowed_rfft, "rfft of a real f32 signal times a window [N] along its "
         "last axis (fusion's form of rfft(mul(x, window))).", precision="f32"),
    _reg("windowed_rfft_power", 2, _infer_windowed_rfft_power, "|windowed_rfft(x, window)|^2 of each bin, f32 "
         "(fusion's form of a windowed rfft's power, re^2 + im^2).", precision="f32"),
    _reg("irfft", 1, _infer_irfft, "Inverse of rfft: the real f32 signal of length n of a half spectrum.",
         precision="f32"),
    _reg("real", 1, _infer_part("real"), "The real parts of a c64 tensor (an f32 view).", is_view=True),
    _reg("imag", 1, _infer_part("imag"), "The imaginary parts of a c64 tensor (an f32 view).", is_view=True),
    _reg("complex", 2, _infer_complex, "A c64 tensor from f32 real and imaginary parts.", precision="f32"),
)
