"""References of the quantized (GGUF block-format) tensors: run_reference
binds their values through rlx/reference/blocks.py (the gguf package's
dequantizer), so dequantize itself is the identity here."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for


@reference_for("dequantize")
def _dequantize(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    # run_reference binds a quantized value as its float values already (rlx/reference/core.py).
    return np.asarray(xs[0], dtype=np.float32)
