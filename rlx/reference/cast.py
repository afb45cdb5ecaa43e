"""Reference of cast (the runner casts every result to the node's dtype;
casts to FP8 round through ml_dtypes, saturating first where asked)."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for


@reference_for("cast")
def _cast(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    if out.dtype.is_fp8:
        from rlx.reference.fp8 import encode

        return encode(xs[0], out.dtype.numpy, attrs.get("saturate", True))
    return xs[0]
