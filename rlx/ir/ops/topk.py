"""Top-k along the last axis.

topk(x, k): x f32 / f16 [..., n] -> i32 [..., k], the indices of the k
  largest elements of each row, in descending order of value. Ties go to
  the lower index, so the order is total and the result matches
  ``np.argsort(-x, kind="stable")[..., :k]`` exactly. NaN sorts above
  +inf, as in torch.topk (the NaNs of a row come first, lower index first);
  -0.0 and +0.0 are equal (a tie). 1 <= k <= MAX_K and k <= n, else
  ShapeError at graph build.
topk_values(x, indices): x [..., n], indices i32 [..., k] -> x's dtype
  [..., k], x[..., indices] (numpy's take_along_axis on the last axis); an
  index outside [0, n) reads as NaN. ``Graph.topk`` pairs the two ops.
"""

from __future__ import annotations

from rlx.errors import DTypeError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _MISSING, _attrs, _float_type, _int, _reg

# The largest k: the GPU kernels keep k candidates per group in group memory
# (shaders/topk.h), and sampling never needs more (llama.cpp's default is 40).
MAX_K = 256


def _infer_topk(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("topk", attrs, {"k": _MISSING})
    (x,) = types
    _float_type("topk", x)
    if x.rank == 0:
        raise ShapeError("topk: input must have rank >= 1, got a scalar")
    k = attrs["k"] = _int("topk", "k", attrs["k"])
    n = x.shape[-1]
    if not 1 <= k <= MAX_K:
        raise ShapeError(f"topk: k must be in [1, {MAX_K}], got {k}")
    if k > n:
        raise ShapeError(f"topk: k={k} exceeds the last axis of {x.shape!r} ({n} elements)")
    if n >= 1 << 31:
        raise ShapeError(f"topk: a row of {n} elements exceeds 2^31 - 1 (indices are i32)")
    return TensorType((*x.shape[:-1], k), "i32")


def _infer_topk_values(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("topk_values", attrs, {})
    x, idx = types
    _float_type("topk_values", x)
    if idx.dtype.name != "i32":
        raise DTypeError(f"topk_values: indices must be i32, got {idx}")
    if x.rank == 0 or idx.rank != x.rank or tuple(idx.shape[:-1]) != tuple(x.shape[:-1]):
        raise ShapeError(f"topk_values: indices {idx.shape!r} must be [..., k] rows of x {x.shape!r}")
    return TensorType(idx.shape, x.dtype)


OPS: tuple[OpDef, ...] = (
    _reg("topk", 1, _infer_topk,
         "Indices (i32) of the k largest elements along the last axis, by descending value; ties to the "
         "lower index, NaN above +inf.", precision="fixed"),
    _reg("topk_values", 2, _infer_topk_values,
         "x gathered along its last axis at i32 indices (take_along_axis); out-of-range indices read NaN.",
         precision="fixed"),
)
