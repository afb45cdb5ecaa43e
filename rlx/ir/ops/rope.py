"""RoPE: rotary position embedding.

rope(x, positions): x [T, H, D] or [B, T, H, D] float, positions int32 [T]
  (shared by every batch row) or [B, T]. inv_freq[i] = base ** (-2i /
  rotary_dim) for i < rotary_dim / 2, angle = position * inv_freq[i]; the pair
  (a, b) = (x[i], x[i + rotary_dim/2]) ("neox") or (x[2i], x[2i+1])
  ("interleaved") becomes (a cos - b sin, a sin + b cos). Features at and
  past rotary_dim pass through unchanged. freq_factors (rotary_dim / 2
  positive floats, or None) divide inv_freq per pair: Llama 3's long-context
  factors (llama.cpp's rope_freqs), and a linear position scale s as 1 / s
  for every pair.

rmsnorm_rope(x, positions, weight) = rope(rmsnorm(x, weight), positions):
  the per-head query/key norm (over D) of Gemma 3, Qwen 3 and the like, and
  RoPE, in one kernel (rlx/opt/fusion.py makes it). Attributes: rope's, and
  the norm's eps and add_one. The normed value is rounded to x's dtype before
  it rotates, as the two plain ops do. An optional second weight serves the
  heads from ``weight_b_from`` on (rmsnorm_rope(x, positions, weight,
  weight_b)): a decoder's query and key heads, adjacent in one projection,
  normed and rotated by one dispatch (rlx/opt/sibling_ropes.py makes it).
"""

from __future__ import annotations

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _bool, _float, _float_type, _int, _number, _reg, _same_dtype

ROPE_LAYOUTS = ("neox", "interleaved")

def rope_inv_freq(base: float, rotary_dim: int, freq_factors: tuple[float, ...] | None = None) -> np.ndarray:
    """inv_freq[i] = base ** (-2i / rotary_dim) / freq_factors[i] for i <
    rotary_dim / 2, in float64 rounded once to float32: the table the kernel
    reads and the reference multiplies by, so both compute the same float32
    angle."""
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    inv = float(base) ** (-2.0 * i / rotary_dim)
    if freq_factors is not None:
        inv = inv / np.asarray(freq_factors, np.float64)
    return inv.astype(np.float32)

def _infer_rope(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("rope", attrs, {"base": 10000.0, "layout": "neox", "rotary_dim": None, "freq_factors": None})
    x, pos = types
    _float_type("rope", x, "x")
    if x.rank not in (3, 4):
        raise ShapeError(f"rope: x must be [T, H, D] or [B, T, H, D], got shape {x.shape!r}")
    if pos.dtype.name != "i32":
        raise DTypeError(f"rope: positions must be i32, got {pos}")
    t, d = x.shape[-3], x.shape[-1]
    want = [(t,)] if x.rank == 3 else [(t,), (x.shape[0], t)]
    if tuple(pos.shape) not in want:
        forms = " or ".join(repr(w) for w in want)
        raise ShapeError(f"rope: positions shape {pos.shape!r} must be {forms} for x {x.shape!r}")
    base = attrs["base"] = _number("rope", "base", attrs["base"])
    if not base > 0:
        raise GraphError(f"rope: base must be > 0, got {base!r}")
    if attrs["layout"] not in ROPE_LAYOUTS:
        raise GraphError(f"rope: layout must be one of {', '.join(ROPE_LAYOUTS)}, got {attrs['layout']!r}")
    rd = d if attrs["rotary_dim"] is None else _int("rope", "rotary_dim", attrs["rotary_dim"])
    if rd <= 0 or rd % 2 or rd > d:
        raise ShapeError(f"rope: rotary_dim must be even, > 0 and <= D={d} for x {x.shape!r}, got {rd}")
    attrs["rotary_dim"] = rd
    factors = attrs["freq_factors"]
    if factors is not None:
        try:
            factors = tuple(float(f) for f in factors)
        except (TypeError, ValueError):
            raise GraphError(f"rope: freq_factors must be a sequence of numbers, got {factors!r}") from None
        if len(factors) != rd // 2 or not all(np.isfinite(f) and f > 0 for f in factors):
            raise GraphError(f"rope: freq_factors must be {rd // 2} finite positive numbers (one a rotated "
                             f"pair), got {len(factors)}")
        attrs["freq_factors"] = factors
    return x


def _infer_rmsnorm_rope(types: list[TensorType], attrs: dict) -> TensorType:
    norm_attrs = {k: attrs.pop(k, v) for k, v in (("eps", 1e-6), ("add_one", False), ("weight_b_from", None))}
    if len(types) not in (3, 4):
        raise GraphError(f"rmsnorm_rope: takes x, positions, weight and an optional second weight, got "
                         f"{len(types)} inputs")
    x, pos, *weights = types
    out = _infer_rope([x, pos], attrs)
    for name, w in zip(("weight", "weight_b"), weights):
        _same_dtype("rmsnorm_rope", [x, w], ["x", name])
        if w.shape != (x.shape[-1],):
            raise ShapeError(f"rmsnorm_rope: {name} shape {w.shape!r} must be ({x.shape[-1]},) to match the last "
                             f"axis of x {x.shape!r}")
    heads = x.shape[-2]
    split = norm_attrs["weight_b_from"]
    if len(weights) == 1:
        if split is not None and split != heads:   # heads: the canonical form (every head takes weight)
            raise GraphError(f"rmsnorm_rope: weight_b_from={split} needs a second weight")
        split = heads
    split = _int("rmsnorm_rope", "weight_b_from", split)
    if not 0 <= split <= heads:
        raise ShapeError(f"rmsnorm_rope: weight_b_from must be in [0, {heads}] (the heads of x {x.shape!r}), "
                         f"got {split}")
    attrs["weight_b_from"] = split
    attrs["eps"] = _float("rmsnorm_rope", "eps", norm_attrs["eps"], 0.0)
    attrs["add_one"] = _bool("rmsnorm_rope", "add_one", norm_attrs["add_one"])
    return out


OPS: tuple[OpDef, ...] = (
    _reg("rope", 2, _infer_rope,
         "Rotary position embedding of x [..., T, H, D] at i32 positions [T] or [B, T] "
         "(layout neox or interleaved; the first rotary_dim features rotate)."),
    _reg("rmsnorm_rope", -1, _infer_rmsnorm_rope,
         "rope(rmsnorm(x, weight), positions), fused: the norm over D, then RoPE (heads from weight_b_from "
         "normed by a second weight).", precision="f32_under_auto"),
)
