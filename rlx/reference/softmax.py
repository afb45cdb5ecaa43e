"""References of softmax and masked_softmax; a row that is -inf everywhere gives zeros,
a row with a NaN is NaN everywhere."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis; a row that is -inf everywhere gives zeros
    (softmax, masked_softmax and attention alike), a row with a NaN is NaN
    everywhere (torch's softmax)."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), np.float32(0), m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s == 0, np.float32(0), e / s)   # s > 0 would turn a NaN row into zeros


@reference_for("softmax")
def _softmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _softmax_rows(as_f32(xs[0]))   # the last axis: the op allows no other


@reference_for("masked_softmax")
def _masked_softmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = as_f32(xs[0]) * np.float32(attrs["scale"])
    if len(xs) == 2:
        x = x + as_f32(xs[1])
    return _softmax_rows(x)
