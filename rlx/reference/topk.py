"""References of the top-k family: topk (a stable sort, NaN first) and
topk_values (take_along_axis)."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import as_f32, reference_for


def topk_order(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest of each row of x (last axis), by descending
    value, ties to the lower index, NaN above everything (torch.topk's
    rule). -0.0 ties with +0.0."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)
    key = np.where(nan, 0.0, -x) + 0.0   # + 0.0 turns -0.0 into +0.0: a tie, as in the kernels
    # lexsort's last key sorts first: NaNs (not-NaN False) first, then -x, then the index.
    index = np.broadcast_to(np.arange(x.shape[-1]), x.shape)
    order = np.lexsort((index, key, ~nan), axis=-1)
    return order[..., :k].astype(np.int32)


@reference_for("topk")
def _topk(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return topk_order(as_f32(xs[0]), attrs["k"])


@reference_for("topk_values")
def _topk_values(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x, idx = xs
    n = x.shape[-1]
    ok = (idx >= 0) & (idx < n)
    got = np.take_along_axis(as_f32(x), np.where(ok, idx, 0).astype(np.int64), axis=-1)
    return np.where(ok, got, np.float32(np.nan))
