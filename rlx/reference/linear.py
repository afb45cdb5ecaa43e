"""References of matmul and linear."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for
from rlx.reference.elementwise import ACTIVATION_REFS


@reference_for("matmul")
def _matmul(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    a, b = as_f32(xs[0]), as_f32(xs[1])
    if attrs.get("transpose_b", False):
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


@reference_for("linear")
def _linear(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    y = _matmul(xs[:2], {"transpose_b": attrs["transpose_b"]}, out)
    if len(xs) == 3:
        y = y + as_f32(xs[2])
    return ACTIVATION_REFS[attrs["activation"]](y)
