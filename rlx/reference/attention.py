"""Numpy reference of attention (semantics: rlx/ir/ops/attention.py).

Scores, softmax and P @ V in float32 (f16 inputs upcast), like the kernel; a
query row with every key masked gives zeros, and one with a NaN score (from q,
k or the mask) is NaN, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import register_reference


def attention(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    length = None
    if len(xs) > 3 and np.issubdtype(np.asarray(xs[-1]).dtype, np.integer):
        length, xs = int(np.asarray(xs[-1]).reshape(-1)[0]), xs[:-1]
    q, k, v = (np.asarray(a, dtype=np.float32) for a in xs[:3])
    b, tq, hq, _ = q.shape
    tk, hkv = k.shape[1], k.shape[2]
    if length is not None:   # attention over the active keys [0, L) alone (the rest are never read)
        active = min(max(length, 0), tk)
        k, v = k[:, :active], v[:, :active]
        if len(xs) == 4:
            m = np.asarray(xs[3])
            xs = [*xs[:3], m[..., :active] if m.shape[-1] == tk else m]
        tk = active
    rep = hq // hkv
    # [B, H, T, D], kv heads repeated so query head h reads kv head h // rep.
    qh = q.transpose(0, 2, 1, 3)
    kh = np.repeat(k.transpose(0, 2, 1, 3), rep, axis=1)
    vh = np.repeat(v.transpose(0, 2, 1, 3), rep, axis=1)
    s = np.matmul(qh, np.swapaxes(kh, -1, -2)) * np.float32(attrs["scale"])
    cap = attrs.get("softcap")
    if cap is not None:
        s = np.float32(cap) * np.tanh(s / np.float32(cap))
    if len(xs) == 4:
        s = s + np.asarray(xs[3], dtype=np.float32)
    s = np.broadcast_to(s, (b, hq, tq, tk)).astype(np.float32)
    qpos = np.arange(tq)[:, None] + (tk - tq)
    j = np.arange(tk)[None, :]
    allowed = np.ones((tq, tk), bool)
    if attrs.get("causal"):
        allowed &= j <= qpos
    if attrs.get("window") is not None:
        allowed &= (qpos - j) < int(attrs["window"])
    s = np.where(allowed, s, np.float32(-np.inf))
    m = np.max(s, axis=-1, keepdims=True) if tk else np.full(s.shape[:-1] + (1,), -np.inf, np.float32)
    dead = np.isneginf(m)                        # every key masked (or no keys): the row is zeros
    m = np.where(dead, np.float32(0), m)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - m)
        denom = np.sum(e, axis=-1, keepdims=True)
        p = np.where(dead, np.float32(0), e / np.where(dead, np.float32(1), denom))
    o = np.matmul(p.astype(np.float32), vh)    # [B, Hq, Tq, Dv]
    return o.transpose(0, 2, 1, 3)


register_reference("attention", attention)
