"""Reference of glu."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for
from rlx.reference.elementwise import ACTIVATION_REFS
from rlx.reference.linear import _linear


@reference_for("glu")
def _glu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return ACTIVATION_REFS[attrs["activation"]](as_f32(xs[0])) * as_f32(xs[1])


@reference_for("glu_linear")
def _glu_linear(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return _linear([_glu(xs[:2], attrs, out), xs[2]], {"transpose_b": True, "activation": None}, out)
