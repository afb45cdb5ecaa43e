"""A numpy lane model of rlx_q_gemv_flat's row sums (shaders/quant_gemv.h).

The CUDA kernel sums each pass's rows with one segmented scan over the
lanes; CI has no GPU, so this model replays the same per-lane steps (the
shuffles as array shifts, the row/column tracking without division, the
open row's carry between passes) and checks every row against its direct
sum. Run: python3 benchmarks/gpu/segmented_scan_sim.py (exits 1 on a
mismatch).
"""

from __future__ import annotations

import sys

import numpy as np

LANES = 32


def shfl_up(s: np.ndarray, d: int) -> np.ndarray:
    """__shfl_up_sync: lane l reads lane l - d; lanes below d keep their own."""
    out = s.copy()
    out[d:] = s[:-d]
    return out


def flat_row_sums(values: np.ndarray, rows: int, chunks: int, pp: int, u_count: int) -> np.ndarray:
    """The kernel's row sums for a (rows, chunks) array of chunk dots."""
    total = rows * chunks
    flat = values.reshape(-1)
    lane = np.arange(LANES)
    row = [(lane + LANES * u) // chunks for u in range(u_count)]
    col = [lane + LANES * u - row[u] * chunks for u in range(u_count)]
    step_rows, step_cols = pp // chunks, pp % chunks
    first_col = 0
    open_sum = 0.0
    y = np.full(rows, np.nan)
    f0 = 0
    while True:
        cnt = min(pp, total - f0)
        nf = f0 + cnt
        v = []
        for u in range(u_count):
            pos = lane + LANES * u
            v.append(np.where(pos < cnt, flat[np.minimum(f0 + pos, total - 1)], 0.0))
        if first_col != 0:
            v[0][0] += open_sum
        for u in range(u_count):
            reach = np.minimum(col[u], lane)
            carried = col[u] > lane
            s = v[u].copy()
            d = 1
            while d < LANES:
                t = shfl_up(s, d)
                s = np.where(d <= reach, s + t, s)
                d <<= 1
            if u > 0:
                s = np.where(carried, s + v[u - 1][31], s)
            v[u] = s
        last = cnt - 1
        open_sum = v[last // LANES][last % LANES]
        for u in range(u_count):
            for ln in range(LANES):
                if ln + LANES * u < cnt and col[u][ln] + 1 == chunks:
                    assert np.isnan(y[row[u][ln]]), "a row stored twice"
                    y[row[u][ln]] = v[u][ln]
        if nf >= total:
            return y
        f0 = nf
        first_col += step_cols
        if first_col >= chunks:
            first_col -= chunks
        for u in range(u_count):
            row[u] = row[u] + step_rows
            col[u] = col[u] + step_cols
            wrap = col[u] >= chunks
            col[u] = np.where(wrap, col[u] - chunks, col[u])
            row[u] = np.where(wrap, row[u] + 1, row[u])


def main() -> int:
    rng = np.random.default_rng(7)
    cases = bad = 0
    for u_count in (1, 2):
        for pp in sorted({8, 16, 24, 32, 64} & set(range(1, LANES * u_count + 1))):
            for chunks in list(range(1, 41)) + [64, 65, 127, 128, 200]:
                for rows in (1, 2, 3, 7):
                    values = rng.integers(-8, 8, size=(rows, chunks)).astype(np.float64)
                    got = flat_row_sums(values, rows, chunks, pp, u_count)
                    cases += 1
                    if not np.array_equal(got, values.sum(axis=1)):
                        bad += 1
                        print(f"mismatch: U={u_count} pp={pp} chunks={chunks} rows={rows}")
    print(f"{cases} cases, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
