"""matmul and linear (matmul + bias + activation epilogue).
"""

from __future__ import annotations

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _bool, _float_type, _reg, _same_dtype, _weight_dtype
from rlx.ir.ops.quant import check_quantized_weight

ACTIVATIONS = (None, "gelu", "gelu_tanh", "silu", "relu")

def _infer_matmul(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("matmul", attrs, {"transpose_b": False})
    tb = attrs["transpose_b"] = _bool("matmul", "transpose_b", attrs["transpose_b"])
    a, b = types
    _float_type("matmul", a, "a")
    _weight_dtype("matmul", a, b, "b")
    if b.dtype.quantized:
        check_quantized_weight("matmul", b, tb, "b")
    if a.rank < 2:
        raise ShapeError(f"matmul: a must have rank >= 2 ([..., M, K]), got shape {a.shape!r}")
    b_form = "[..., N, K]" if tb else "[..., K, N]"
    if b.rank != 2 and b.rank != a.rank:
        raise ShapeError(f"matmul: b must be 2-D or have a's rank {a.rank} ({b_form}), "
                         f"got a {a.shape!r}, b {b.shape!r}")
    if b.rank > 2 and tuple(b.shape[:-2]) != tuple(a.shape[:-2]):
        raise ShapeError(f"matmul: batch dims differ: a {a.shape!r}, b {b.shape!r}")
    m, k = a.shape[-2], a.shape[-1]
    (n, kb) = (b.shape[-2], b.shape[-1]) if tb else (b.shape[-1], b.shape[-2])
    if k != kb:
        raise ShapeError(f"matmul: inner dims differ: a {a.shape!r} has K={k}, b {b.shape!r} "
                         f"{'(transpose_b) ' if tb else ''}has K={kb}")
    return TensorType(tuple(a.shape[:-2]) + (m, n), a.dtype)

def _infer_linear(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("linear", attrs, {"activation": None, "transpose_b": True})
    if len(types) not in (2, 3):
        raise GraphError(f"linear: takes x, weight and an optional bias, got {len(types)} inputs")
    if attrs["activation"] not in ACTIVATIONS:
        raise GraphError(f"linear: activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    tb = attrs["transpose_b"] = _bool("linear", "transpose_b", attrs["transpose_b"])
    x, w = types[:2]
    _float_type("linear", x, "x")
    _weight_dtype("linear", x, w, "weight")
    if w.dtype.quantized:
        check_quantized_weight("linear", w, tb, "weight")
    if len(types) == 3:
        _same_dtype("linear", [x, types[2]], ["x", "bias"])
    if x.rank < 1 or w.rank != 2:
        raise ShapeError(f"linear: x must be [..., K] and weight 2-D, got {x.shape!r} and {w.shape!r}")
    n, k = (w.shape[0], w.shape[1]) if tb else (w.shape[1], w.shape[0])
    if x.shape[-1] != k:
        raise ShapeError(f"linear: x {x.shape!r} has K={x.shape[-1]}, weight {w.shape!r} "
                         f"{'([N, K]) ' if tb else '([K, N]) '}has K={k}")
    if len(types) == 3 and types[2].shape != (n,):
        raise ShapeError(f"linear: bias shape {types[2].shape!r} must be ({n},)")
    return TensorType(tuple(x.shape[:-1]) + (n,), x.dtype)


OPS: tuple[OpDef, ...] = (
    _reg("matmul", 2, _infer_matmul, "a @ b (or a @ b^T with transpose_b), optionally batched."),
    _reg("linear", -1, _infer_linear, "activation(x @ W^T + bias): matmul with a fused epilogue."),
)
