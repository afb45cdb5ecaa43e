"""Scaled dot-product attention.

attention(q, k, v[, mask][, length]): q [B, Tq, Hq, D], k [B, Tk, Hkv, D],
  v [B, Tk, Hkv, Dv], Hq a multiple of Hkv (query head h reads kv head
  h // (Hq // Hkv)). For query i and key j, with qpos = i + Tk - Tq (the last
  query sits at the last key): s = (q . k) * scale; with softcap, s =
  softcap * tanh(s / softcap); then s += mask (additive, broadcast to
  [B, Hq, Tq, Tk]); causal masks j > qpos; window w masks qpos - j >= w (a
  lower bound only: combine with causal for sliding-window decoders).
  p = softmax_j(s); out[i] = sum_j p_j v[j] -> [B, Tq, Hq, Dv]. A query row
  whose keys are all masked (every s = -inf) gives zeros, not NaN.
  length: an optional i32 [1] operand read at run time (the active length
  of a KV cache): L = length clamped to [0, Tk]; keys j >= L are masked and
  the last query sits at the last active key (qpos = i + L - Tq), so one
  compiled graph serves every length and the kernels read only L keys.
"""

from __future__ import annotations

import math

from rlx.errors import GraphError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _bool, _float_type, _int, _number, _reg, _same_dtype


def split_length(inputs: list) -> tuple[list, object]:
    """(q, k, v[, mask]) and the length operand (the trailing integer
    input) or None; works on nodes and on types (both carry a dtype)."""
    if len(inputs) > 3 and not inputs[-1].dtype.is_float:
        return list(inputs[:-1]), inputs[-1]
    return list(inputs), None


def _infer_attention(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("attention", attrs, {"causal": False, "scale": None, "softcap": None, "window": None})
    types, length = split_length(types)
    if len(types) not in (3, 4):
        raise GraphError(f"attention: expects 3 inputs (q, k, v), 4 (q, k, v, mask) and an optional i32 "
                         f"length, got {len(types)} float inputs")
    if length is not None and (length.dtype.name != "i32" or tuple(length.shape) != (1,)):
        raise ShapeError(f"attention: length must be i32 [1], got {length.dtype.name} {length.shape!r}")
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


OPS: tuple[OpDef, ...] = (
    _reg("attention", -1, _infer_attention,
         "Scaled dot-product attention with grouped-query heads, causal / sliding-window / "
         "additive masks, a run-time i32 active length and logit softcap; fully masked rows give zeros."),
)
