"""Numpy reference of RoPE (semantics: rlx/ir/ops/rope.py).

RoPE's angle is computed exactly as the kernel computes it: the position as
float32 times a float32 inv_freq table (``rlx.ir.ops.rope.rope_inv_freq``,
the table the lowering hands the kernel), one float32 multiply. sin, cos and
the rotation are then float64, so the oracle is never the least accurate
party.
"""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.ir.ops.rope import rope_inv_freq
from rlx.reference.core import register_reference


def rope(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, pos = xs
    x = np.asarray(x, dtype=np.float64)
    rd = int(attrs["rotary_dim"])
    half = rd // 2
    inv = rope_inv_freq(attrs["base"], rd, attrs.get("freq_factors"))
    # positions [T] or [B, T] -> angle [..., T, 1, half] as float32 (one rounding, as the kernel).
    angle = (np.asarray(pos).astype(np.float32)[..., None] * inv).astype(np.float32)
    angle = angle.astype(np.float64)[..., None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = x.copy()
    if attrs["layout"] == "neox":
        a, b = x[..., :half], x[..., half:rd]
        y[..., :half] = a * cos - b * sin
        y[..., half:rd] = a * sin + b * cos
    else:
        a, b = x[..., 0:rd:2], x[..., 1:rd:2]
        y[..., 0:rd:2] = a * cos - b * sin
        y[..., 1:rd:2] = a * sin + b * cos
    return y


def rmsnorm_rope(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    """rope of the rmsnorm over D, the normed value rounded to x's dtype first
    (as the two plain ops store it); the norm in float64; heads from
    weight_b_from take the second weight where there is one."""
    x, pos = np.asarray(xs[0], np.float64), xs[1]
    w = np.broadcast_to(np.asarray(xs[2], np.float64), x.shape[-2:]).copy()   # a weight row per head
    if len(xs) == 4:
        w[attrs["weight_b_from"]:] = np.asarray(xs[3], np.float64)
    ms = np.mean(np.square(x), axis=-1, keepdims=True)
    normed = x / np.sqrt(ms + attrs["eps"]) * ((1.0 + w) if attrs["add_one"] else w)
    return rope([normed.astype(out.dtype.numpy), pos], attrs, out)


register_reference("rope", rope)
register_reference("rmsnorm_rope", rmsnorm_rope)
