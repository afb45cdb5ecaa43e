"""FP8 quantization helpers: scales and codes for weights on the host
(``quantize_array``), per-row dynamic quantization inside a graph
(``quantize``), and the expansion of float weight values into the codes
and scales of a graph whose weights the precision pass made FP8
(``expand_params``, used by rlx.compile and Executable.set_params).

The scale of a group of values is amax / max_finite (448 for e4m3, 57344
for e5m2), so the group's largest magnitude maps to the format's largest
finite value; an all-zero group gets the smallest positive scale
(``MIN_SCALE``) and codes of zero. Codes are cast with saturation.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlx.errors import DTypeError, ParameterError
from rlx.ir.dtype import DType, f32
from rlx.ir.graph import Graph, Node

__all__ = ["MIN_SCALE", "SCALE_SUFFIX", "dequantize_array", "expand_params", "fp8_max", "quantize", "quantize_array"]

MIN_SCALE = 1e-12
# The precision pass names the scale of an FP8 weight ``<weight>`` so:
SCALE_SUFFIX = ".fp8_scale"


def _fp8(dtype: DType | str) -> DType:
    dt = DType.of(dtype)
    if not dt.is_fp8:
        raise DTypeError(f"expected f8e4m3 or f8e5m2, got {dt}")
    return dt


def fp8_max(dtype: DType | str) -> float:
    """The largest finite value of an FP8 dtype (448 or 57344)."""
    import ml_dtypes

    return float(ml_dtypes.finfo(_fp8(dtype).numpy).max)


def quantize_array(values: np.ndarray, dtype: DType | str = "f8e4m3", granularity: str = "channel",
                   block: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(codes, f32 scales) of float ``values`` [..., K]: granularity
    "tensor" (one scale, shape (1,)), "channel" (one per row: [...]), or
    "block" (2-D values, ``block=(br, bc)``: [ceil(R / br), ceil(C / bc)])."""
    from rlx.reference.fp8 import encode, scale_full

    dt = _fp8(dtype)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim < 1:
        raise ParameterError("quantize_array: values need at least one dimension")
    top = fp8_max(dt)
    mag = np.abs(x)
    if granularity == "tensor":
        scale = np.array([mag.max(initial=0.0) / top])
        bsz = (max(int(np.prod(x.shape[:-1])), 1), max(x.shape[-1], 1))
    elif granularity == "channel":
        scale = mag.max(axis=-1, initial=0.0) / top
        bsz = (1, max(x.shape[-1], 1))
    elif granularity == "block":
        if x.ndim != 2 or block is None:
            raise ParameterError("quantize_array: block granularity needs 2-D values and block=(br, bc)")
        br, bc = (int(b) for b in block)
        rows, cols = x.shape
        pad = np.zeros((-(-rows // br) * br, -(-cols // bc) * bc))
        pad[:rows, :cols] = mag
        scale = pad.reshape(-(-rows // br), br, -(-cols // bc), bc).max(axis=(1, 3)) / top
        bsz = (br, bc)
    else:
        raise ParameterError(f"quantize_array: granularity must be 'tensor', 'channel' or 'block', got "
                             f"{granularity!r}")
    scale = np.maximum(scale, MIN_SCALE).astype(np.float32)
    codes = encode((x / scale_full(scale, x.shape, bsz)).astype(np.float32), dt.numpy, True)
    return codes, scale


def dequantize_array(codes: np.ndarray, scale: np.ndarray, block: tuple[int, int] | None = None) -> np.ndarray:
    """The f32 values that ``quantize_array``'s (codes, scales) stand for:
    the scale's shape says the granularity ((1,): tensor, the rows: channel),
    except for block scales, which need ``block=(br, bc)``."""
    from rlx.reference.fp8 import scaled_values

    codes = np.asarray(codes)
    if codes.ndim < 1:
        raise ParameterError("dequantize_array: codes need at least one dimension")
    rows, cols = max(int(np.prod(codes.shape[:-1])), 1), max(codes.shape[-1], 1)
    scale = np.asarray(scale, dtype=np.float32)
    if block is None:
        if scale.size == 1:
            block = (rows, cols)
        elif scale.size == rows:
            block = (1, cols)
        else:
            raise ParameterError(f"dequantize_array: {scale.size} scales for {rows} rows: pass block=(br, bc)")
    return scaled_values(codes.astype(np.float32), scale, block).astype(np.float32)


def quantize(g: Graph, x: Node, dtype: DType | str = "f8e4m3") -> tuple[Node, Node]:
    """Per-row dynamic quantization computed on the device: (codes [...,
    K], f32 scales [..., 1]) of float x [..., K], the scale of each row its
    amax / max_finite."""
    dt = _fp8(dtype)
    xf = x if x.dtype == f32 else g.cast(x, f32)
    amax = g.max(g.maximum(xf, g.neg(xf)), axis=-1, keepdims=True)
    scale = g.maximum(g.scale_shift(amax, 1.0 / fp8_max(dt), 0.0), g.constant(np.float32(MIN_SCALE)))
    return g.cast(g.div(xf, scale), dt, saturate=True), scale


def expand_params(values: Mapping[str, object], dtypes: Mapping[str, DType]) -> dict[str, object]:
    """``values`` with each float value of an FP8 param that has a
    ``<name>.fp8_scale`` companion (and no value given for it) replaced by
    its per-channel codes, plus the scale."""
    out = dict(values)
    for name, dtype in dtypes.items():
        scale_name = name + SCALE_SUFFIX
        if not dtype.is_fp8 or scale_name not in dtypes or name not in values or scale_name in values:
            continue
        value = np.asarray(values[name])
        if value.dtype == dtype.numpy:
            raise ParameterError(f"parameter {name!r}: FP8 codes given without {scale_name!r}; pass both, or "
                                 "the float weight to quantize")
        if not np.issubdtype(value.dtype, np.floating):
            raise ParameterError(f"parameter {name!r}: expected float weight values, got {value.dtype}")
        out[name], out[scale_name] = quantize_array(value, dtype, "channel")
    return out
