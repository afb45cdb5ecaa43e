"""References of the FFT family (rlx/ir/ops/fft.py): numpy.fft in float64
(complex128), rounded to the node's dtype by the runner, so the oracle is
more accurate than any f32 kernel it checks."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for


def _c128(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.complex128)


@reference_for("fft")
def _fft(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.fft.fft(_c128(xs[0]), axis=-1, norm=attrs["norm"])


@reference_for("ifft")
def _ifft(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.fft.ifft(_c128(xs[0]), axis=-1, norm=attrs["norm"])


@reference_for("rfft")
def _rfft(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.fft.rfft(np.asarray(xs[0], np.float64), axis=-1, norm=attrs["norm"])


@reference_for("windowed_rfft")
def _windowed_rfft(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, window = (np.asarray(v, np.float64) for v in xs)
    return np.fft.rfft(x * window.reshape(-1), axis=-1, norm=attrs["norm"])


@reference_for("windowed_rfft_power")
def _windowed_rfft_power(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.abs(_windowed_rfft(xs, attrs, out)) ** 2


@reference_for("irfft")
def _irfft(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.fft.irfft(_c128(xs[0]), n=attrs["n"], axis=-1, norm=attrs["norm"])


@reference_for("real")
def _real(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.real(xs[0])


@reference_for("imag")
def _imag(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.imag(xs[0])


@reference_for("complex")
def _complex(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.asarray(xs[0], np.float64) + 1j * np.asarray(xs[1], np.float64)
