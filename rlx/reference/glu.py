"""Reference of glu."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for
from rlx.reference.elementwise import ACTIVATION_REFS


@reference_for("glu")
def _glu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return ACTIVATION_REFS[attrs["activation"]](as_f32(xs[0])) * as_f32(xs[1])
