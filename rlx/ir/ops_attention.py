"""RoPE and scaled dot-product attention: attrs, type inference, validation.

Same conventions as rlx/ir/ops.py: infer validates and normalizes attrs in
place (``scale`` becomes a float, ``rotary_dim`` an int), so the reference,
the lowering and the kernels read one canonical form. Messages start with the
op name and name the offending shapes.

Semantics (rlx/reference/attention.py is the executable form):

rope(x, positions): x [T, H, D] or [B, T, H, D] float, positions int32 [T]
  (shared by every batch row) or [B, T]. inv_freq[i] = base ** (-2i /
  rotary_dim) for i < rotary_dim / 2, angle = position * inv_freq[i]; the pair
  (a, b) = (x[i], x[i + rotary_dim/2]) ("neox") or (x[2i], x[2i+1])
  ("interleaved") becomes (a cos - b sin, a sin + b cos). Features at and
  past rotary_dim pass through unchanged.

attention(q, k, v[, mask]): q [B, Tq, Hq, D], k [B, Tk, Hkv, D],
  v [B, Tk, Hkv, Dv], Hq a multiple of Hkv (query head h reads kv head
  h // (Hq // Hkv)). For query i and key j, with qpos = i + Tk - Tq (the last
  query sits at the last key): s = (q . k) * scale; with softcap, s =
  softcap * tanh(s / softcap); then s += mask (additive, broadcast to
  [B, Hq, Tq, Tk]); causal masks j > qpos; window w masks qpos - j >= w (a
  lower bound only: combine with causal for sliding-window decoders).
  p = softmax_j(s); out[i] = sum_j p_j v[j] -> [B, Tq, Hq, Dv]. A query row
  whose keys are all masked (every s = -inf) gives zeros, not NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops import _attrs, _bool, _float_type, _int, _reg, _same_dtype

ROPE_LAYOUTS = ("neox", "interleaved")


def _number(op: str, what: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise GraphError(f"{op}: {what} must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise GraphError(f"{op}: {what} must be finite, got {v!r}")
    return v


# ---------------------------------------------------------------- rope


def rope_inv_freq(base: float, rotary_dim: int) -> np.ndarray:
    """inv_freq[i] = base ** (-2i / rotary_dim) for i < rotary_dim / 2, in
    float64 rounded once to float32: the table the kernel reads and the
    reference multiplies by, so both compute the same float32 angle."""
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    return (float(base) ** (-2.0 * i / rotary_dim)).astype(np.float32)


def _infer_rope(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("rope", attrs, {"base": 10000.0, "layout": "neox", "rotary_dim": None})
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
    return x


# ---------------------------------------------------------------- attention


def _infer_attention(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("attention", attrs, {"causal": False, "scale": None, "softcap": None, "window": None})
    if len(types) not in (3, 4):
        raise GraphError(f"attention: expects 3 inputs (q, k, v) or 4 (q, k, v, mask), got {len(types)}")
    names = ["q", "k", "v", "mask"][: len(types)]
    for t, n in zip(types, names):
        _float_type("attention", t, n)
    _same_dtype("attention", list(types), names)
    q, k, v = types[:3]
    for t, n, form in ((q, "q", "[B, Tq, Hq, D]"), (k, "k", "[B, Tk, Hkv, D]"), (v, "v", "[B, Tk, Hkv, Dv]")):
        if t.rank != 4:
            raise ShapeError(f"attention: {n} must be 4-D {form}, got shape {t.shape!r}")
    b, tq, hq, d = q.shape
    shapes = f"q {q.shape!r}, k {k.shape!r}, v {v.shape!r}"
    if k.shape[0] != b or v.shape[0] != b:
        raise ShapeError(f"attention: batch sizes differ: {shapes}")
    if k.shape[3] != d:
        raise ShapeError(f"attention: q and k head dims differ: {shapes}")
    if tuple(k.shape[1:3]) != tuple(v.shape[1:3]):
        raise ShapeError(f"attention: k and v must share [Tk, Hkv]: {shapes}")
    hkv = k.shape[2]
    if hkv == 0 or hq % hkv:
        raise ShapeError(f"attention: query heads Hq={hq} must be a multiple of kv heads Hkv={hkv}: {shapes}")
    tk, dv = k.shape[1], v.shape[3]
    if len(types) == 4:
        m = types[3]
        full = (b, hq, tq, tk)
        ok = m.rank <= 4 and all(md in (1, fd) for md, fd in zip(reversed(m.shape), reversed(full)))
        if not ok:
            raise ShapeError(f"attention: mask shape {m.shape!r} does not broadcast to [B, Hq, Tq, Tk] = {full!r}")
    attrs["causal"] = _bool("attention", "causal", attrs["causal"])
    if attrs["scale"] is None:
        if d == 0:
            raise ShapeError(f"attention: head dim D is 0, give scale explicitly: {shapes}")
        attrs["scale"] = 1.0 / math.sqrt(d)
    else:
        attrs["scale"] = _number("attention", "scale", attrs["scale"])
    if attrs["softcap"] is not None:
        cap = attrs["softcap"] = _number("attention", "softcap", attrs["softcap"])
        if not cap > 0:
            raise GraphError(f"attention: softcap must be None or > 0, got {cap!r}")
    if attrs["window"] is not None:
        w = attrs["window"] = _int("attention", "window", attrs["window"])
        if w < 1:
            raise GraphError(f"attention: window must be None or >= 1, got {w}")
    return TensorType((b, tq, hq, dv), q.dtype)


# ---------------------------------------------------------------- registration

ATTENTION_OPS: tuple[OpDef, ...] = (
    _reg("rope", 2, _infer_rope,
         "Rotary position embedding of x [..., T, H, D] at i32 positions [T] or [B, T] "
         "(layout neox or interleaved; the first rotary_dim features rotate)."),
    _reg("attention", -1, _infer_attention,
         "Scaled dot-product attention with grouped-query heads, causal / sliding-window / "
         "additive masks and logit softcap; fully masked rows give zeros."),
)

__all__ = ["ATTENTION_OPS", "ROPE_LAYOUTS", "rope_inv_freq"]
