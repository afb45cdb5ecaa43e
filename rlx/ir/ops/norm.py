"""Layer and RMS norms over the last axis, and their fused residual forms.

The post-norm residual forms (rlx/opt/fusion.py makes them from a
sandwich-norm decoder's ``x + rmsnorm(o, w)``, e.g. Gemma's):
- rmsnorm_add(o, x, w) = x + rmsnorm(o, w)
- rmsnorm_add_rmsnorm(o, x, w, w_next) -> [2, *x.shape]: [0] rmsnorm(s,
  w_next), [1] the sum s = x + rmsnorm(o, w) (eps / add_one for the first
  norm, next_eps / next_add_one for the second). One kernel writes both, so
  the two values are one packed tensor and ``Graph.rmsnorm_add_rmsnorm``
  hands back the two halves as views (no copy). The normed half comes first:
  it is what the next block's projections read, and the quantized GEMVs take
  their x at offset 0 (their params carry no offset).
Both round rmsnorm(o, w) and the sum to x's dtype before using them, as the
chain of plain ops does, so the fusion does not change an f16 result.
"""

from __future__ import annotations

from rlx.errors import ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _bool, _float, _float_type, _reg, _same_dtype


def _infer_layernorm(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("layernorm", attrs, {"eps": 1e-5})
    x, w, b = types
    for t, what in ((x, "x"), (w, "weight"), (b, "bias")):
        _float_type("layernorm", t, what)
    _same_dtype("layernorm", [x, w, b], ["x", "weight", "bias"])
    if x.rank == 0:
        raise ShapeError("layernorm: x must have rank >= 1, got a scalar")
    d = x.shape[-1]
    for t, what in ((w, "weight"), (b, "bias")):
        if t.shape != (d,):
            raise ShapeError(f"layernorm: {what} shape {t.shape!r} must be ({d},) to match the last "
                             f"axis of x {x.shape!r}")
    attrs["eps"] = _float("layernorm", "eps", attrs["eps"], 0.0)
    return x

def _check_norm_weights(op: str, x: TensorType, named: list[tuple[TensorType, str]]) -> None:
    d = x.shape[-1]
    for t, what in named:
        _float_type(op, t, what)
        if t.shape != (d,):
            raise ShapeError(f"{op}: {what} shape {t.shape!r} must be ({d},) to match the last axis of x {x.shape!r}")

def _infer_rmsnorm(op: str, with_residual: bool):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        _attrs(op, attrs, {"eps": 1e-6, "add_one": False})
        x = types[0]
        _float_type(op, x, "x")
        if x.rank == 0:
            raise ShapeError(f"{op}: x must have rank >= 1, got a scalar")
        rest = types[1:]
        names = ["x"] + (["residual", "weight"] if with_residual else ["weight"])
        _same_dtype(op, types, names)
        if with_residual and rest[0].shape != x.shape:
            raise ShapeError(f"{op}: residual shape {rest[0].shape!r} must equal x's {x.shape!r}")
        _check_norm_weights(op, x, [(rest[-1], "weight")])
        attrs["eps"] = _float(op, "eps", attrs["eps"], 0.0)
        attrs["add_one"] = _bool(op, "add_one", attrs["add_one"])
        return x
    return infer

def _infer_add_layernorm(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("add_layernorm", attrs, {"eps": 1e-5})
    x, r, w, b = types
    _float_type("add_layernorm", x, "x")
    _same_dtype("add_layernorm", types, ["x", "residual", "weight", "bias"])
    if x.rank == 0:
        raise ShapeError("add_layernorm: x must have rank >= 1, got a scalar")
    if r.shape != x.shape:
        raise ShapeError(f"add_layernorm: residual shape {r.shape!r} must equal x's {x.shape!r}")
    _check_norm_weights("add_layernorm", x, [(w, "weight"), (b, "bias")])
    attrs["eps"] = _float("add_layernorm", "eps", attrs["eps"], 0.0)
    return x


def _infer_rmsnorm_add(op: str, then_norm: bool):
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        extra = {"next_eps": 1e-6, "next_add_one": False} if then_norm else {}
        _attrs(op, attrs, {"eps": 1e-6, "add_one": False, **extra})
        o, x = types[0], types[1]
        _float_type(op, o, "o")
        if o.rank == 0:
            raise ShapeError(f"{op}: o must have rank >= 1, got a scalar")
        names = ["o", "x", "weight"] + (["next_weight"] if then_norm else [])
        _same_dtype(op, types, names)
        if x.shape != o.shape:
            raise ShapeError(f"{op}: x shape {x.shape!r} must equal o's {o.shape!r}")
        _check_norm_weights(op, o, [(t, what) for t, what in zip(types[2:], names[2:])])
        for key in ("eps", "next_eps") if then_norm else ("eps",):
            attrs[key] = _float(op, key, attrs[key], 0.0)
        for key in ("add_one", "next_add_one") if then_norm else ("add_one",):
            attrs[key] = _bool(op, key, attrs[key])
        return TensorType((2, *o.shape), o.dtype) if then_norm else x
    return infer


OPS: tuple[OpDef, ...] = (
    _reg("layernorm", 3, _infer_layernorm,
         "(x - mean) / sqrt(var + eps) * weight + bias over the last axis.", precision="f32_under_auto"),
    _reg("rmsnorm", 2, _infer_rmsnorm("rmsnorm", False),
         "x / sqrt(mean(x^2) + eps) * weight (or * (1 + weight) with add_one).", precision="f32_under_auto"),
    _reg("add_rmsnorm", 3, _infer_rmsnorm("add_rmsnorm", True), "rmsnorm(x + residual), fused.",
         precision="f32_under_auto"),
    _reg("add_layernorm", 4, _infer_add_layernorm, "layernorm(x + residual), fused.",
         precision="f32_under_auto"),
    _reg("rmsnorm_add", 3, _infer_rmsnorm_add("rmsnorm_add", False), "x + rmsnorm(o, weight), fused.",
         precision="f32_under_auto"),
    _reg("rmsnorm_add_rmsnorm", 4, _infer_rmsnorm_add("rmsnorm_add_rmsnorm", True),
         "[rmsnorm(s, next_weight), s] for s = x + rmsnorm(o, weight), packed on a new leading axis of 2.",
         precision="f32_under_auto"),
)
