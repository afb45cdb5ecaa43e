"""References of the FP8 family: casts through ml_dtypes (the oracle of
the kernels' rounding, NaN and overflow rules), scaled values and the
scaled linear layer in float64."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for
from rlx.reference.elementwise import ACTIVATION_REFS


def fp8_max(dtype) -> float:
    """The largest finite value of an FP8 numpy dtype (448, 57344)."""
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).max)


def encode(x: np.ndarray, dtype, saturate: bool) -> np.ndarray:
    """float values -> FP8 (ml_dtypes' rounding; with saturate, finite
    overflows and infinities clamp to the largest finite of their sign)."""
    x = np.asarray(x, dtype=np.float32)
    if saturate:
        top = fp8_max(dtype)
        x = np.where(np.isnan(x), x, np.clip(x, -top, top)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


def scale_full(scale: np.ndarray, shape: tuple[int, ...], block: tuple[int, int]) -> np.ndarray:
    """The scale of every element of a [..., cols] tensor (float64), from
    scales covering blocks of block[0] rows (of the flattened form) x block[1] columns."""
    cols = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    br, bc = block
    s = np.asarray(scale, dtype=np.float64).reshape(-(-rows // br) if rows else 0, -(-cols // bc)) if rows else \
        np.zeros((0, -(-cols // bc)))
    full = np.repeat(np.repeat(s, br, axis=0)[:rows], bc, axis=1)[:, :cols]
    return full.reshape(shape)


def scaled_values(v: np.ndarray, scale: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    return np.asarray(v).astype(np.float64) * scale_full(scale, tuple(v.shape), tuple(block))


@reference_for("scaled_dequantize")
def _scaled_dequantize(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return scaled_values(xs[0], xs[1], attrs["block"])


@reference_for("scaled_linear")
def _scaled_linear(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = np.asarray(xs[0], dtype=np.float64)
    w = scaled_values(xs[1], xs[2], attrs["block"])
    y = x @ w.T
    if len(xs) == 4:
        y = y + np.asarray(xs[3], dtype=np.float64)
    return ACTIVATION_REFS[attrs["activation"]](y)
