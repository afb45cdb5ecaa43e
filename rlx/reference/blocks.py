"""The values of quantized (GGUF block-format) tensors, from the gguf
package's own dequantizer (``gguf.quants.dequantize``, llama.cpp's reference
in numpy): the oracle every kernel test compares with. No rlx imports but
the dtypes, so run_reference (core) and the family (quant) both use it."""

from __future__ import annotations

import numpy as np

from rlx.errors import DTypeError
from rlx.ir.dtype import DType, from_bf16


def gguf_type(dtype: DType):
    """The gguf package's GGMLQuantizationType of a block format (or bf16)."""
    import gguf

    try:
        return gguf.GGMLQuantizationType[dtype.name.upper()]
    except KeyError:
        raise DTypeError(f"{dtype} is not a GGUF type") from None


def dequantize_values(dtype: DType, raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 values of a quantized tensor of logical ``shape`` stored in
    ``raw`` (uint8, rows of whole blocks; bf16: uint16 bits or their bytes)."""
    if dtype.name == "bf16":
        return from_bf16(np.ascontiguousarray(raw).view(np.uint16)).reshape(shape)
    import gguf.quants

    values = gguf.quants.dequantize(np.ascontiguousarray(raw, dtype=np.uint8), gguf_type(dtype))
    return np.asarray(values, dtype=np.float32).reshape(shape)
