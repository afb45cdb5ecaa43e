"""FP8 weights rounded against calibration inputs (GPTQ's error feedback).

Round to nearest gives every weight an error relative to itself (e4m3 has
three mantissa bits), and those errors add up in each output with no regard
for the inputs the layer sees. GPTQ (Frantar et al., 2022) rounds the
columns of a weight one at a time and moves each column's rounding error
onto the columns not yet rounded, weighted through the inverse of the
inputs' second moment H = E[x x^T]: the product W x on inputs like the
calibration ones stays closer to the float one, for the same codes and the
same per-row scales (so the FP8 kernels and tensor-core paths run
unchanged). Columns go in order of decreasing H[i, i] ("act order"): the
inputs' largest features are rounded first, while the most columns are left
to absorb their error.

Everything here is numpy on the host, once per model (rlx.models'
``calibrate_fp8`` collects H per linear layer).
"""

from __future__ import annotations

import numpy as np

from rlx.errors import ParameterError
from rlx.fp8 import MIN_SCALE, _fp8, fp8_max
from rlx.ir.dtype import DType

__all__ = ["gptq_quantize", "output_error"]

# Lazy-batch width: columns rounded one at a time inside a block, the rest
# of the weight updated once a block by a matrix product.
_BLOCK = 128


def gptq_quantize(weight: np.ndarray, hessian: np.ndarray, dtype: DType | str = "f8e4m3", damp: float = 0.3,
                  act_order: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(codes [N, K], f32 scales [N]) of weight [N, K], one scale per output
    row (amax / max_finite, as ``rlx.fp8.quantize_array(..., "channel")``),
    the codes chosen by GPTQ against ``hessian`` [K, K] (the layer inputs'
    E[x x^T], symmetric positive semi-definite). ``damp`` (a fraction of the
    mean diagonal added to it) keeps its inverse well conditioned; on
    MiniLM 0.03, 0.1 and 0.3 landed within 0.0009 of each other at the
    worst sentence, 0.3 the best (benchmarks/README.md, "CPU: FP8 accuracy
    on MiniLM")."""
    dt = _fp8(dtype)
    w = np.array(weight, dtype=np.float64)
    h = np.array(hessian, dtype=np.float64)
    if w.ndim != 2 or h.shape != (w.shape[1], w.shape[1]):
        raise ParameterError(f"gptq_quantize: weight [N, K] and hessian [K, K], got {w.shape} and {h.shape}")
    if not (np.isfinite(w).all() and np.isfinite(h).all()):
        raise ParameterError("gptq_quantize: weight and hessian must be finite")
    if not damp > 0:
        raise ParameterError(f"gptq_quantize: damp must be > 0, got {damp}")
    top = fp8_max(dt)
    scale = (np.maximum(np.abs(w).max(axis=1, initial=0.0) / top, MIN_SCALE)).astype(np.float32)
    s = scale.astype(np.float64)[:, None]
    n, k = w.shape
    codes = np.zeros((n, k), dt.numpy)
    if n == 0 or k == 0:
        return codes, scale

    h = (h + h.T) / 2
    dead = np.diag(h) <= 0   # inputs always zero: any code does; round to nearest
    h[dead, dead] = 1.0
    order = np.argsort(-np.diag(h), kind="stable") if act_order else np.arange(k)
    w, h = w[:, order], h[np.ix_(order, order)]
    h += damp * float(np.mean(np.diag(h))) * np.eye(k)
    # The upper Cholesky factor of H^-1: row i holds how column i's error
    # spreads over the columns after it, and U[i, i] its own weight.
    u = np.linalg.cholesky(np.linalg.inv(h)).T

    def round_column(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = np.clip(col[:, None] / s, -top, top).astype(np.float32).astype(dt.numpy)
        return c[:, 0], c.astype(np.float64)[:, 0] * s[:, 0]

    for b0 in range(0, k, _BLOCK):
        b1 = min(b0 + _BLOCK, k)
        wb = w[:, b0:b1].copy()
        err = np.zeros_like(wb)
        for i in range(b1 - b0):
            c, q = round_column(wb[:, i])
            codes[:, order[b0 + i]] = c
            e = (wb[:, i] - q) / u[b0 + i, b0 + i]
            wb[:, i + 1:] -= np.outer(e, u[b0 + i, b0 + i + 1:b1])
            err[:, i] = e
        w[:, b1:] -= err @ u[b0:b1, b1:]
    return codes, scale


def output_error(weight: np.ndarray, rounded: np.ndarray, hessian: np.ndarray) -> float:
    """E[|W x - Q x|^2] over inputs of second moment ``hessian``:
    trace((W - Q) H (W - Q)^T), the quantity GPTQ lowers."""
    d = np.asarray(weight, np.float64) - np.asarray(rounded, np.float64)
    return float(np.einsum("nk,kl,nl->", d, np.asarray(hessian, np.float64), d))
