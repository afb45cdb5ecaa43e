"""The sort family: a stable device radix sort, reusable by any op that
needs one (the splat renderer's tile/depth keys; later top-k sampling).

sort_by_key(records [, count]; keys, bits): records i32 [n, c] (1 <= c <=
  MAX_COLS) -> i32 [n, c]: rows [0, m) stably sorted by their first
  ``keys`` columns (1 or 2) read as unsigned 32-bit words, column 0 most
  significant, of which only the low ``bits`` bits of column 0 count (the
  other key words all 32; fewer bits, fewer passes). m = min(count[0], n)
  when the optional count (i32 [1], device data: a count computed on the
  device, e.g. by a prefix sum) is given, else n. Rows at and past m are
  unspecified. The remaining columns ride along (values).
"""

from __future__ import annotations

from rlx.errors import DTypeError, ShapeError
from rlx.ir.op import OpDef, TensorType
from rlx.ir.ops.common import _attrs, _int, _reg

MAX_COLS = 4


def _infer_sort_by_key(types: list[TensorType], attrs: dict) -> TensorType:
    _attrs("sort_by_key", attrs, {"keys": 1, "bits": 32})
    if len(types) not in (1, 2):
        raise ShapeError(f"sort_by_key: takes records and an optional count, got {len(types)} inputs")
    rec = types[0]
    if rec.dtype.name != "i32":
        raise DTypeError(f"sort_by_key: records must be i32, got {rec}")
    if rec.rank != 2 or not 1 <= rec.shape[1] <= MAX_COLS:
        raise ShapeError(f"sort_by_key: records must be [n, c] with 1 <= c <= {MAX_COLS}, got {rec.shape!r}")
    keys = attrs["keys"] = _int("sort_by_key", "keys", attrs["keys"])
    bits = attrs["bits"] = _int("sort_by_key", "bits", attrs["bits"])
    if keys not in (1, 2) or keys > rec.shape[1]:
        raise ShapeError(f"sort_by_key: keys must be 1 or 2 and <= the {rec.shape[1]} columns, got {keys}")
    if not 1 <= bits <= 32:
        raise ShapeError(f"sort_by_key: bits must be in [1, 32], got {bits}")
    if len(types) == 2:
        cnt = types[1]
        if cnt.dtype.name != "i32" or tuple(cnt.shape) != (1,):
            raise ShapeError(f"sort_by_key: count must be i32[1], got {cnt}")
    return TensorType(rec.shape, "i32")


OPS: tuple[OpDef, ...] = (
    _reg("sort_by_key", -1, _infer_sort_by_key,
         "Rows of i32 [n, c] stably radix-sorted by their first 1 or 2 columns as unsigned words "
         "(optionally only the first count[0] rows).", precision="fixed"),
)
