"""References of layernorm, rmsnorm and their fused residual forms."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for


@reference_for("layernorm")
def _layernorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, w, b = (as_f32(a) for a in xs)
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean(np.square(x - mean), axis=-1, keepdims=True)  # biased, as in BERT/PyTorch
    return (x - mean) / np.sqrt(var + np.float32(attrs.get("eps", 1e-5))) * w + b


def _rms(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    ms = np.mean(np.square(x), axis=-1, keepdims=True)
    scale = (np.float32(1) + w) if attrs["add_one"] else w
    return x / np.sqrt(ms + np.float32(attrs["eps"])) * scale


@reference_for("rmsnorm")
def _rmsnorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _rms(as_f32(xs[0]), as_f32(xs[1]), attrs)


@reference_for("add_rmsnorm")
def _add_rmsnorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _rms(as_f32(xs[0]) + as_f32(xs[1]), as_f32(xs[2]), attrs)


@reference_for("add_layernorm")
def _add_layernorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _layernorm([as_f32(xs[0]) + as_f32(xs[1]), xs[2], xs[3]], attrs, out)


def _rms64(x: np.ndarray, w: np.ndarray, eps: float, add_one: bool, dtype: np.dtype) -> np.ndarray:
    """rmsnorm in float64, rounded once to the op's dtype (as the plain op stores it)."""
    ms = np.mean(np.square(x), axis=-1, keepdims=True)
    scale = (1.0 + w) if add_one else w
    return (x / np.sqrt(ms + eps) * scale).astype(dtype).astype(np.float64)


def _residual_sum(xs: list[np.ndarray], attrs: dict, dtype: np.dtype) -> np.ndarray:
    """x + rmsnorm(o, w), each step rounded to the op's dtype like the plain chain."""
    o, x, w = (np.asarray(a, np.float64) for a in xs[:3])
    return (x + _rms64(o, w, attrs["eps"], attrs["add_one"], dtype)).astype(dtype).astype(np.float64)


@reference_for("rmsnorm_add")
def _rmsnorm_add(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _residual_sum(xs, attrs, out.dtype.numpy)


@reference_for("rmsnorm_add_rmsnorm")
def _rmsnorm_add_rmsnorm(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    s = _residual_sum(xs, attrs, out.dtype.numpy)
    h = _rms64(s, np.asarray(xs[3], np.float64), attrs["next_eps"], attrs["next_add_one"], out.dtype.numpy)
    return np.stack([h, s])
