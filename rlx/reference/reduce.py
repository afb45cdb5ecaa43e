"""References of the reductions: sum, mean, max, argmax."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for, register_reference

for _name, _fn in {"sum": np.sum, "mean": np.mean, "max": np.max}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(as_f32(xs[0]), axis=attrs["axis"],
                                                                  keepdims=attrs["keepdims"]))


@reference_for("argmax")
def _argmax(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    r = np.argmax(as_f32(xs[0]), axis=attrs["axis"])
    return np.expand_dims(r, attrs["axis"]) if attrs["keepdims"] else r
