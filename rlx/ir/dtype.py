"""Element types of tensors in the graph IR.

rlx computes in four element types (f32, f16, i32, i64), plus the complex
c64 of the FFT family (below); anything else is rejected at graph build
time, so later layers (kernels, memory planning) never meet a surprise.
bf16 is a storage type only: the weights of
``linear`` and ``matmul`` under ``precision="bf16"`` (the host's gemm reads
them and accumulates in f32). Its numpy form is the raw bits as uint16
(``to_bf16`` / ``from_bf16`` convert). ``DType.of`` does not accept it: only
the precision pass makes bf16 params; graph inputs, casts and every other op
reject it.

The GGUF block formats (q4_0 ... nvfp4, ``QUANTIZED``) are storage types
too: a quantized tensor is a row-major [..., K] array whose rows are K /
``block`` consecutive blocks of ``block_bytes`` bytes (exactly GGUF's
tensor data); its numpy form is those raw bytes (uint8, shape [..., K /
block * block_bytes]). Sizes go through ``nbytes``: ``itemsize`` of a block
type raises, so no element-size arithmetic silently breaks on blocks. Such a
tensor is accepted only as the weight of linear/matmul, the table of a
gather, and the input of dequantize (``rlx.ir.graph`` checks every op).

f8e4m3 and f8e5m2 are the 8-bit floats of FP8 checkpoints (safetensors
F8_E4M3 / F8_E5M2): e4m3 is the "fn" variant (no infinities, NaN = S.1111.111,
max 448), e5m2 the IEEE-like one (infinities, max 57344). Their numpy forms
are ``ml_dtypes.float8_e4m3fn`` and ``ml_dtypes.float8_e5m2``. Like bf16
they are storage only: casts make and read them, ``scaled_dequantize`` and
``scaled_linear`` (rlx/ir/ops/fp8.py) read them with their scales, and
every other op refuses them.

c64 is a complex of two f32 (real, imaginary: numpy's complex64, 8 bytes
an element). It is not ``is_float``: no real-valued op computes on it, so
every check of ``is_float`` keeps it out and the precision policies leave it
alone. Only the FFT family (rlx/ir/ops/fft.py: fft, ifft, rfft, irfft,
real, imag, complex) accepts or makes it; ``rlx.ir.graph`` refuses it
anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from rlx.errors import DTypeError

__all__ = ["DType", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "FP8", "i32", "i64", "c64", "to_bf16", "from_bf16",
           "QUANTIZED", "quantized"]


@dataclass(frozen=True)
class DType:
    """One element type: its short name, bytes per block of ``block``
    elements (1 for every non-quantized type), numpy equivalent (the raw
    bytes for block types) and whether it holds floats that ops compute on."""

    name: str
    block_bytes: int
    numpy: np.dtype
    is_float: bool
    block: int = 1
    is_complex: bool = False

    @property
    def quantized(self) -> bool:
        """A GGUF block format (elements stored in blocks, not one by one)."""
        return self.block > 1 or self.name in _QUANTIZED_SIZES

    @property
    def storage_only(self) -> bool:
        """Held in memory but never computed on directly: bf16 and the block formats."""
        return self.name == "bf16" or self.is_fp8 or self.quantized

    @property
    def is_fp8(self) -> bool:
        """One of the 8-bit floats (f8e4m3, f8e5m2)."""
        return self.name in ("f8e4m3", "f8e5m2")

    @property
    def itemsize(self) -> int:
        """Bytes per element; block formats have none (use ``nbytes``)."""
        if self.quantized:
            raise DTypeError(f"{self.name} is a block format ({self.block} elements in {self.block_bytes} "
                             "bytes): it has no size per element; use DType.nbytes")
        return self.block_bytes

    def nbytes(self, numel: int, row: int | None = None) -> int:
        """Bytes of ``numel`` elements. For a block format the rows (of
        ``row`` elements, the last dim) must be whole blocks."""
        if not self.quantized:
            return numel * self.block_bytes
        if (row if row is not None else numel) % self.block:
            raise DTypeError(f"{self.name}: rows of {row if row is not None else numel} elements are not a "
                             f"multiple of its block of {self.block}")
        return numel // self.block * self.block_bytes

    def storage_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The numpy shape of a tensor's storage: ``shape`` itself, or for a
        block format the bytes of each row (rows of whole blocks)."""
        shape = tuple(int(d) for d in shape)
        if not self.quantized:
            return shape
        if not shape:
            raise DTypeError(f"{self.name}: a block format needs at least one dimension")
        return shape[:-1] + (self.nbytes(shape[-1]),)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name})"

    # Keep the instances unique through pickle/copy, so ``dt is f16`` stays valid.
    def __reduce__(self) -> tuple:
        return (_named, (self.name,))

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: dict) -> DType:
        return self

    @staticmethod
    def of(x: Any) -> DType:
        """Coerce a DType, a name ("f32", "float16", "half", ...) or a numpy dtype/type.

        Every user-facing API goes through this, so one spelling of the error
        names the rejected value and what would have been accepted.
        """
        if isinstance(x, DType):
            return x
        if isinstance(x, str):
            found = _BY_NAME.get(x.lower())
            if found is not None:
                return found
        elif isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
            found = _BY_NUMPY.get(np.dtype(x))
            if found is not None:
                return found
        raise DTypeError(f"unsupported dtype {x!r}; accepted: {', '.join(_ACCEPTED)} "
                         "(or the matching numpy dtype)")


f32 = DType("f32", 4, np.dtype(np.float32), True)
f16 = DType("f16", 2, np.dtype(np.float16), True)
i32 = DType("i32", 4, np.dtype(np.int32), False)
i64 = DType("i64", 8, np.dtype(np.int64), False)
# Complex: (re, im) f32 pairs, interleaved as numpy's complex64 stores them.
c64 = DType("c64", 8, np.dtype(np.complex64), False, is_complex=True)
# Storage only (see the module docstring): numpy holds the raw bits.
bf16 = DType("bf16", 2, np.dtype(np.uint16), True)
f8e4m3 = DType("f8e4m3", 1, np.dtype(ml_dtypes.float8_e4m3fn), True)
f8e5m2 = DType("f8e5m2", 1, np.dtype(ml_dtypes.float8_e5m2), True)
FP8: tuple[DType, ...] = (f8e4m3, f8e5m2)

# GGUF block formats: (elements per block, bytes per block), as llama.cpp's
# ggml defines them (tests/ir/test_quantized.py checks them against the gguf
# package). GGUF's BF16 is rlx's bf16 above.
_QUANTIZED_SIZES: dict[str, tuple[int, int]] = {
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
    "iq1_s": (256, 50), "iq1_m": (256, 56), "iq2_xxs": (256, 66), "iq2_xs": (256, 74), "iq2_s": (256, 82),
    "iq3_xxs": (256, 98), "iq3_s": (256, 110), "iq4_nl": (32, 18), "iq4_xs": (256, 136),
    "tq1_0": (256, 54), "tq2_0": (256, 66), "mxfp4": (32, 17), "nvfp4": (64, 36),
}
QUANTIZED: dict[str, DType] = {name: DType(name, nbytes, np.dtype(np.uint8), False, block)
                               for name, (block, nbytes) in _QUANTIZED_SIZES.items()}


def quantized(name: str) -> DType:
    """A block format by name, any case ("Q4_K", "q4_k"); GGUF's "BF16" gives bf16."""
    key = str(name).lower()
    if key == "bf16":
        return bf16
    found = QUANTIZED.get(key)
    if found is None:
        raise DTypeError(f"unknown quantized format {name!r}; known: {', '.join(QUANTIZED)}, bf16")
    return found

_BY_NAME: dict[str, DType] = {
    "f32": f32, "float32": f32,
    "f16": f16, "float16": f16, "half": f16,
    "i32": i32, "int32": i32,
    "i64": i64, "int64": i64,
    "c64": c64, "complex64": c64,
    "f8e4m3": f8e4m3, "float8_e4m3fn": f8e4m3, "f8_e4m3": f8e4m3, "e4m3": f8e4m3,
    "f8e5m2": f8e5m2, "float8_e5m2": f8e5m2, "f8_e5m2": f8e5m2, "e5m2": f8e5m2,
}
_ACCEPTED: tuple[str, ...] = tuple(_BY_NAME) + ("q4_0 ... nvfp4 (the GGUF block formats)",)


def _named(name: str) -> DType:
    """Any instance by its name, bf16 and the block formats included (unpickling)."""
    return bf16 if name == "bf16" else QUANTIZED[name] if name in QUANTIZED else DType.of(name)


_BY_NAME.update(QUANTIZED)   # params may be declared "q4_k"; the graph checks where they are used

# bf16's numpy form (uint16 bits) is not a way to spell it: a uint16 array is not bf16.
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in (f32, f16, i32, i64, c64, f8e4m3, f8e5m2)}


def to_bf16(values) -> np.ndarray:
    """float values -> bf16 bits (uint16), rounded to nearest even; NaN stays NaN.
    The same rounding as the host shim's kernels (csrc/host_bf16.h)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    out = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded)
    return out.astype(np.uint16)


def from_bf16(bits) -> np.ndarray:
    """bf16 bits (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
