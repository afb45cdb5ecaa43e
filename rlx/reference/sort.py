"""Reference of the sort family (rlx/ir/ops/sort.py): a stable sort of
rows by their leading key columns as unsigned 32-bit words."""

from __future__ import annotations

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import reference_for


def sort_rows(records: np.ndarray, count: int, keys: int) -> np.ndarray:
    """Rows [0, count) of records [n, c] (int32) stably sorted by columns
    0 .. keys - 1 as unsigned words, column 0 most significant; rows at and
    past count as they are."""
    records = np.asarray(records)
    count = max(0, min(int(count), records.shape[0]))
    out = records.copy()
    head = records[:count].astype(np.int64) & 0xFFFFFFFF
    order = np.lexsort(tuple(head[:, j] for j in reversed(range(keys))))
    out[:count] = records[:count][order]
    return out


@reference_for("sort_by_key")
def _sort_by_key(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    records = xs[0]
    count = int(xs[1].reshape(-1)[0]) if len(xs) > 1 else records.shape[0]
    keys = attrs["keys"]
    bits = attrs["bits"]
    if bits < 32:   # the kernels sort on the low `bits` bits of the first word only
        masked = records.copy()
        masked[:, 0] &= np.int32((1 << bits) - 1) if bits < 31 else np.int32(0x7FFFFFFF)
        srt = sort_rows(np.concatenate([masked[:, :keys], records], 1), count, keys)
        return np.ascontiguousarray(srt[:, keys:])
    return sort_rows(records, count, keys)
