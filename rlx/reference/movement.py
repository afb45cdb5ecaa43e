"""References of gather, concat, copy and the view ops."""

from __future__ import annotations

import numpy as np

from rlx.errors import InputError
from rlx.ir import TensorType
from rlx.reference.core import reference_for


@reference_for("gather")
def _gather(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    table, idx = xs
    v = table.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= v):
        bad = idx[(idx < 0) | (idx >= v)].ravel()[0]
        raise InputError(f"gather: index {int(bad)} is out of range for a table of {v} rows")
    return table[idx]


@reference_for("reshape")
def _reshape(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.reshape(xs[0], tuple(out.shape))


@reference_for("transpose")
def _transpose(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.transpose(xs[0], tuple(attrs["perm"]))


@reference_for("narrow")
def _narrow(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = xs[0]
    index = [slice(None)] * x.ndim
    index[attrs["axis"]] = slice(attrs["start"], attrs["start"] + attrs["length"])
    return x[tuple(index)]


@reference_for("frames")
def _frames(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = np.asarray(xs[0])
    windows = np.lib.stride_tricks.sliding_window_view(x, attrs["frame_length"], axis=-1)
    return windows[..., ::attrs["hop"], :]


@reference_for("copy")
def _copy(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.array(xs[0], order="C", copy=True)


@reference_for("concat")
def _concat(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return np.concatenate(xs, axis=attrs["axis"])
