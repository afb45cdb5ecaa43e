"""Casts between float dtypes: f32 <-> f16, and f32/f16 <-> the FP8 formats
(f8e4m3, f8e5m2; rlx/ir/dtype.py).

A cast to FP8 rounds to nearest even; ``saturate`` (default True, the
quantizers' choice) clamps finite overflows and infinities to the largest
finite value of their sign, and without it they follow ml_dtypes (NaN for
e4m3, which has no infinity; infinity for e5m2). NaN stays NaN either way.
A cast from FP8 is exact (every FP8 value is an f16 value).
"""

from __future__ import annotations

from rlx.errors import DTypeError
from rlx.ir.dtype import DType
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _bool, _reg


def _infer_cast(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("cast", attrs, {"dtype": _MISSING, "saturate": True})
    (x,) = types
    to = attrs["dtype"] = DType.of(attrs["dtype"])
    attrs["saturate"] = _bool("cast", "saturate", attrs["saturate"])
    computable = ("f32", "f16")
    ok = ((x.dtype.name in computable and (to.name in computable or to.is_fp8))
          or (x.dtype.is_fp8 and to.name in computable))
    if not ok:
        raise DTypeError(f"cast: supported casts are f32 <-> f16 and f32/f16 <-> f8e4m3/f8e5m2, "
                         f"got {x.dtype} -> {to}")
    return TensorType(x.shape, to)


OPS: tuple[OpDef, ...] = (
    _reg("cast", 1, _infer_cast, "Convert between float dtypes (f32, f16, f8e4m3, f8e5m2).", precision="fixed"),
)
