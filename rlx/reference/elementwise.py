"""References of the elementwise family (binary with broadcasting, unary), and the
activation functions linear and glu apply."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from rlx.ir import TensorType
from rlx.reference.core import REFERENCE, as_f32, erfc, reference_for, register_reference


@reference_for("add")
def _add(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return as_f32(xs[0]) + as_f32(xs[1])


@reference_for("mul")
def _mul(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return as_f32(xs[0]) * as_f32(xs[1])


@reference_for("gelu")
def _gelu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = as_f32(xs[0])
    if attrs.get("approximate", "none") == "tanh":
        c = np.float32(math.sqrt(2.0 / math.pi))
        return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))
    # x * Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2 in float64: 1 + erf cancels for negative x
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):   # -inf * 0 is NaN, as in the kernels
        return (0.5 * x64 * erfc(-x64 / math.sqrt(2.0))).astype(np.float32)


@reference_for("silu")
def _silu(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    x = as_f32(xs[0])
    with np.errstate(over="ignore"):  # exp(-x) -> inf for very negative x gives the right limit 0
        return x / (np.float32(1.0) + np.exp(-x))


ACTIVATION_REFS: dict[str | None, Callable[[np.ndarray], np.ndarray]] = {
    None: lambda x: x,
    "gelu": lambda x: _gelu([x], {}, None),
    "gelu_tanh": lambda x: _gelu([x], {"approximate": "tanh"}, None),
    "silu": lambda x: _silu([x], {}, None),
    "relu": lambda x: np.maximum(x, np.float32(0)),
}


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):   # log 0 = -inf, log(x < 0) = NaN, as the kernel
        return np.log(x)


for _name, _fn in {
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "tanh": np.tanh,
    "exp": np.exp,
    "log": lambda x: _log(x),
    "neg": np.negative,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x),
}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(as_f32(xs[0])))


for _name, _fn in {"sub": np.subtract, "div": np.divide, "maximum": np.maximum, "minimum": np.minimum}.items():
    register_reference(_name, lambda xs, attrs, out, _fn=_fn: _fn(as_f32(xs[0]), as_f32(xs[1])))


@reference_for("scale_shift")
def _scale_shift(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    return as_f32(xs[0]) * np.float32(attrs["scale"]) + np.float32(attrs["shift"])


def _chain_step(name: str, a: np.ndarray, b: np.ndarray | None, scale: float, shift: float) -> np.ndarray:
    if name == "gelu_tanh":
        return _gelu([a], {"approximate": "tanh"}, None)
    if name == "scale_shift":
        return _scale_shift([a], {"scale": scale, "shift": shift}, None)
    return REFERENCE[name]([a] if b is None else [a, b], {}, None)


@reference_for("fused_elementwise")
def _fused_elementwise(xs: list[np.ndarray], attrs: dict, out: TensorType) -> np.ndarray:
    """Each step in f32 as its own op's reference, with no rounding to the
    graph's dtype between steps (the kernel keeps them in f32 registers)."""
    slots = [as_f32(x) for x in xs]
    for name, a, b, scale, shift in attrs["steps"]:
        slots.append(np.asarray(_chain_step(name, slots[a], None if b < 0 else slots[b], scale, shift),
                                np.float32))
    return np.broadcast_to(slots[-1], out.shape)
