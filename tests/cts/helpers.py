"""Helpers shared by the conformance files (and the backend-specific shim
tests): host <-> buffer copies, the binary kernel's params, a user kernel."""

from __future__ import annotations

import numpy as np

NP_DTYPE = {"f32": np.float32, "f16": np.float16}
ADD, MUL = 0, 1


def binary_params(n, op, *, shape=None, a_strides=None, b_strides=None, a_offset=0, b_offset=0) -> bytes:
    """shaders/elementwise.h BinaryParams: n, ndim, op, contiguous, a_offset, b_offset,
    pad0, pad1, shape[6], a_strides[6], b_strides[6] (all uint32)."""
    p = np.zeros(8 + 18, np.uint32)
    contiguous = shape is None
    shape = shape or (n,)
    p[:8] = [n, len(shape), op, int(contiguous), a_offset, b_offset, 0, 0]
    p[8:8 + len(shape)] = shape
    p[14:14 + len(shape)] = a_strides or (1,)
    p[20:20 + len(shape)] = b_strides or (1,)
    return p.tobytes()


def upload(device, array: np.ndarray, extra: int = 0):
    buf = device.alloc(array.nbytes + extra)
    buf.write(0, np.ascontiguousarray(array))
    return buf


def download(buf, dtype, count, offset=0) -> np.ndarray:
    return np.frombuffer(buf.read(offset, count * np.dtype(dtype).itemsize), dtype=dtype).copy()


def add_one_operands(device, x0: np.ndarray):
    """Buffers for x += 1 in place with binary_f32 (bind x, ones, x, params):
    x holding x0 (f32), a vector of ones and the params of the addition."""
    n = x0.size
    x, one = upload(device, x0), upload(device, np.ones(n, np.float32))
    return x, one, upload(device, np.frombuffer(binary_params(n, ADD), np.uint8))


def rng(seed=0):
    return np.random.default_rng(seed)


# A kernel compiled from user source (the RLX_* macros of shaders/prelude).
USER_KERNEL = """
struct ScaleParams { uint n; float scale; float bias; uint pad; };

template <typename T>
RLX_KERNEL scale_bias(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                      RLX_PARAMS(ScaleParams, p, 2) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        y[i] = rlx_from_float<T>(rlx_to_float(x[i]) * p->scale + p->bias);
    }
}
RLX_INSTANTIATE(scale_bias, float, scale_bias_f32)
RLX_INSTANTIATE(scale_bias, half, scale_bias_f16)
"""
