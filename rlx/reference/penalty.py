"""Reference of the repetition penalty (llama.cpp's rule, once per distinct id)."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for


def apply_repetition_penalty(logits: np.ndarray, history: np.ndarray, penalty: float) -> np.ndarray:
    """One row (or rows sharing one history): each distinct id of history in
    [0, V) has its logit divided by penalty where > 0, else multiplied, in
    f32 (the kernel's arithmetic, so both agree bit for bit)."""
    x = np.array(logits, np.float32)
    v = x.shape[-1]
    h = np.asarray(history, np.int64).reshape(-1)
    ids = np.unique(h[(h >= 0) & (h < v)])
    if ids.size:
        p = np.float32(penalty)
        vals = x[..., ids]
        with np.errstate(over="ignore", divide="ignore"):   # past f32's range is inf, as in the kernel
            x[..., ids] = np.where(vals > 0, vals / p, vals * p)
    return x


@reference_for("repetition_penalty")
def _repetition_penalty(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, history, penalty = as_f32(xs[0]), np.asarray(xs[1]), float(np.asarray(xs[2], np.float32).reshape(-1)[0])
    if history.ndim == 1:
        return apply_repetition_penalty(x, history, penalty)
    rows = x.reshape(-1, x.shape[-1])
    hist = history.reshape(-1, history.shape[-1])
    return np.stack([apply_repetition_penalty(r, h, penalty) for r, h in zip(rows, hist)]).reshape(x.shape)
