"""sort_by_key (shaders/sort.h, the radix sort family) against
rlx/reference/sort.py: exact equality of the sorted rows (integers; the
sort is stable, so the order is fully defined). Counts from a device
tensor (fewer rows than the buffer, zero, more than the buffer: clamped),
one and two key words, fewer key bits, 1 to 4 columns, and sizes that do
not divide into the passes' chunks. Rows past the count are unspecified
and not compared."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.lowering import sort as lowering_sort
from rlx.reference.sort import sort_rows


def _run(records: np.ndarray, count: int | None, keys: int, bits: int = 32) -> np.ndarray:
    g = rlx.Graph()
    rec = g.input("rec", records.shape, "i32")
    ins = [rec]
    feeds = {"rec": records}
    if count is not None:
        ins.append(g.input("count", (1,), "i32"))
        feeds["count"] = np.array([count], np.int32)
    g.set_outputs(out=g.op("sort_by_key", ins, keys=keys, bits=bits))
    got = rlx.compile(g).run(feeds)["out"]
    want = rlx.run_reference(g, feeds)["out"]
    m = records.shape[0] if count is None else max(0, min(count, records.shape[0]))
    np.testing.assert_array_equal(got[:m], want[:m])
    return got[:m]


@pytest.mark.parametrize("n,cols,keys", [(1, 1, 1), (7, 2, 1), (1000, 3, 2), (12345, 3, 2), (40000, 4, 2),
                                         (5000, 2, 2)])
def test_sort_matches_the_reference(rng, n, cols, keys):
    rec = rng.integers(-2**31, 2**31, size=(n, cols), dtype=np.int64).astype(np.int32)
    rec[:, 0] = rng.integers(0, 50, n)   # many ties on the first word: stability matters
    got = _run(rec, None, keys)
    np.testing.assert_array_equal(got, sort_rows(rec, n, keys))


@pytest.mark.parametrize("count", [0, 1, 999, 3000, 5000])
def test_device_count_bounds_the_rows_sorted(rng, count):
    rec = rng.integers(0, 2**31, size=(3000, 3), dtype=np.int64).astype(np.int32)
    got = _run(rec, count, 2)
    m = min(count, 3000)
    np.testing.assert_array_equal(got, sort_rows(rec, m, 2)[:m])


def test_fewer_key_bits_means_fewer_passes(rng):
    rec = rng.integers(0, 2**31, size=(2000, 3), dtype=np.int64).astype(np.int32)
    rec[:, 0] = rng.integers(0, 3600, 2000)   # 12 bits: two passes on word 0, four on word 1
    assert len(lowering_sort.radix_passes(2, 12)) == 6
    got = _run(rec, 2000, 2, bits=12)
    np.testing.assert_array_equal(got, sort_rows(rec, 2000, 2))


def test_unsigned_order_and_stability(rng):
    """Negative int32 words sort above positive ones (unsigned order); equal
    keys keep their input order (the last column records it)."""
    n = 4096
    rec = np.zeros((n, 3), np.int32)
    rec[:, 0] = rng.choice(np.array([-1, 0, 5, -2**31, 2**31 - 1], np.int32), n)
    rec[:, 1] = rng.integers(0, 3, n)
    rec[:, 2] = np.arange(n)
    got = _run(rec, None, 2)
    u = got[:, 0].astype(np.int64) & 0xFFFFFFFF
    assert (np.diff(u) >= 0).all()
    for w in np.unique(u):
        sel = got[u == w]
        for k in np.unique(sel[:, 1]):
            assert (np.diff(sel[sel[:, 1] == k, 2]) > 0).all()


@pytest.mark.parametrize("blocks", [1, 3, 64])
def test_any_chunking_sorts_the_same(rng, monkeypatch, blocks):
    monkeypatch.setattr(lowering_sort, "sort_blocks", lambda target, n: blocks)
    rec = rng.integers(0, 1000, size=(2500, 2)).astype(np.int32)
    np.testing.assert_array_equal(_run(rec, 2400, 1), sort_rows(rec, 2400, 1)[:2400])


@pytest.mark.parametrize("groups", [1, 2, 7])
def test_any_scan_grouping_sorts_the_same(rng, monkeypatch, groups):
    """The histogram scan over one group (the rescan alone) or several
    (sums, their scan, rescans): the same rows."""
    monkeypatch.setattr(lowering_sort, "sort_blocks", lambda target, n: 5)
    monkeypatch.setattr(lowering_sort, "scan_groups", lambda target, n: groups)
    rec = rng.integers(-2**31, 2**31, size=(3001, 3), dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(_run(rec, 2999, 2), sort_rows(rec, 2999, 2)[:2999])


def test_bad_attrs_are_graph_errors():
    g = rlx.Graph()
    rec = g.input("rec", (4, 2), "i32")
    with pytest.raises(rlx.ShapeError, match="keys"):
        g.op("sort_by_key", [rec], keys=3)
    with pytest.raises(rlx.ShapeError, match="bits"):
        g.op("sort_by_key", [rec], bits=0)
    with pytest.raises(rlx.DTypeError):
        g.op("sort_by_key", [g.input("f", (4, 2))])
