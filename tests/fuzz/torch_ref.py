"""The rlx-op -> PyTorch translation the fuzzer compares against.

Every float value is held as a float32 torch tensor (f16 values are upcast
exactly), every op computes in float32 from them (exp, tanh, sqrt, rsqrt,
silu, gelu and softmax in float64, rounded to float32: see _in_f64), and a node declared f16
rounds its result to f16 (it stores f16). So an f16 op is checked against
"PyTorch in float32 from the same f16 inputs".

A quantized param (a GGUF block format) enters as gguf's dequantization of
its blocks, the oracle of issue 17, in float32.

Semantics are PyTorch's: NaN propagates through relu / maximum / minimum /
max / softmax / norms, argmax returns the first NaN's index. Two rlx-defined
exceptions, both documented in docs/kernels.md: a softmax, masked_softmax or
attention row whose every logit is -inf gives zeros (PyTorch would give NaN), and
attention's causal / window masks follow rlx/ir/ops/attention.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from rlx.reference.blocks import dequantize_values
from rlx.reference.core import set_rows_in_place
from rlx.reference.fp8 import scale_full

__all__ = ["TORCH_OPS", "torch_run"]

Fn = Callable[[list, dict, object], torch.Tensor]
TORCH_OPS: dict[str, Fn] = {}


def _op(*names: str):
    def deco(fn: Fn) -> Fn:
        for n in names:
            TORCH_OPS[n] = fn
        return fn
    return deco


def _binary(fn):
    return lambda xs, attrs, node: fn(xs[0], xs[1])


for _name, _fn in {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                   "maximum": torch.maximum, "minimum": torch.minimum}.items():
    TORCH_OPS[_name] = _binary(_fn)

def _in_f64(fn):
    """fn evaluated in float64 and rounded back to the input's dtype. PyTorch's
    float32 transcendental kernels depend on the CPU's vector path: on one CI
    machine torch.exp was off by 1.4e-4 relative on 7 of 8,320 elements (fuzz
    seed 9) while numpy and rlx were correctly rounded. The oracle must not
    carry that error, so the transcendental functions (exp, log, tanh, sqrt,
    rsqrt, silu, gelu, softmax) are computed in float64 here."""
    return lambda x: fn(x.double()).to(x.dtype)


for _name, _fn in {"relu": torch.relu, "tanh": _in_f64(torch.tanh), "exp": _in_f64(torch.exp),
                   "log": _in_f64(torch.log),
                   "neg": torch.neg, "sqrt": _in_f64(torch.sqrt), "rsqrt": _in_f64(torch.rsqrt),
                   "silu": _in_f64(F.silu)}.items():
    TORCH_OPS[_name] = lambda xs, attrs, node, _fn=_fn: _fn(xs[0])

def _gelu_erf(x):
    # F.gelu(+inf) is NaN in torch 2.13 (CPU); the formula's limit, and rlx's value, is +inf.
    return 0.5 * x * torch.erfc(x * (-1.0 / math.sqrt(2.0)))   # 1 + erf would cancel for x < 0


_ACT = {None: lambda x: x, "gelu": _in_f64(_gelu_erf), "gelu_tanh": _in_f64(lambda x: F.gelu(x, approximate="tanh")),
        "silu": _in_f64(F.silu), "relu": torch.relu}


@_op("gelu")
def _gelu(xs, attrs, node):
    return _ACT["gelu_tanh" if attrs.get("approximate", "none") == "tanh" else "gelu"](xs[0])


@_op("scale_shift")
def _scale_shift(xs, attrs, node):
    return xs[0] * attrs["scale"] + attrs["shift"]


def _dead_rows_zero(s: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis; a row whose every logit is -inf gives zeros (rlx's rule)."""
    p = _in_f64(lambda v: torch.softmax(v, dim=-1))(s)
    dead = torch.all(torch.isneginf(s), dim=-1, keepdim=True)
    return torch.where(dead, torch.zeros_like(p), p)


@_op("softmax")
def _softmax(xs, attrs, node):
    return _dead_rows_zero(xs[0])   # the last axis: the op allows no other


@_op("masked_softmax")
def _masked_softmax(xs, attrs, node):
    s = xs[0] * attrs["scale"]
    if len(xs) == 2:
        s = s + xs[1]
    return _dead_rows_zero(s)


def _layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def _rms_norm(x, w, attrs):
    scale = (1.0 + w) if attrs["add_one"] else w
    return x * _in_f64(torch.rsqrt)(torch.mean(x * x, dim=-1, keepdim=True) + attrs["eps"]) * scale


@_op("layernorm")
def _layernorm(xs, attrs, node):
    return _layer_norm(xs[0], xs[1], xs[2], attrs["eps"])


@_op("add_layernorm")
def _add_layernorm(xs, attrs, node):
    return _layer_norm(xs[0] + xs[1], xs[2], xs[3], attrs["eps"])


@_op("rmsnorm")
def _rmsnorm(xs, attrs, node):
    return _rms_norm(xs[0], xs[1], attrs)


@_op("add_rmsnorm")
def _add_rmsnorm(xs, attrs, node):
    return _rms_norm(xs[0] + xs[1], xs[2], attrs)


def _residual(xs, attrs, node):
    """x + rmsnorm(o, w), the normed o rounded to the node's dtype first: the
    fused op is defined as the plain chain, whose rmsnorm stores it."""
    return xs[1] + _round(_rms_norm(xs[0], xs[2], attrs), node.dtype.name)


@_op("rmsnorm_add")
def _rmsnorm_add(xs, attrs, node):
    return _residual(xs, attrs, node)


@_op("rmsnorm_add_rmsnorm")
def _rmsnorm_add_rmsnorm(xs, attrs, node):
    s = _round(_residual(xs, attrs, node), node.dtype.name)
    h = _rms_norm(s, xs[3], {"eps": attrs["next_eps"], "add_one": attrs["next_add_one"]})
    return torch.stack([h, s])   # packed [normed, sum]: the graph's two outputs are views of it


@_op("rmsnorm_rope")
def _rmsnorm_rope(xs, attrs, node):
    x = xs[0]
    w = xs[2].expand(x.shape[-2:]).clone()   # a weight row per head
    if len(xs) == 4:
        w[attrs["weight_b_from"]:] = xs[3]
    normed = _round(_rms_norm(x, w, attrs), node.dtype.name)   # as the plain rmsnorm stores it
    return _rope([normed, xs[1]], attrs, node)


def _topk_order(x: torch.Tensor, k: int) -> torch.Tensor:
    """torch.topk's order with its tie rule made explicit: NaN first, then
    descending, equal values (-0.0 and +0.0 too) by ascending index."""
    nan = torch.isnan(x)
    by_value = torch.sort(torch.where(nan, torch.zeros_like(x), -x) + 0.0, dim=-1, stable=True).indices
    nan_first = torch.sort((~nan).gather(-1, by_value).to(torch.int8), dim=-1, stable=True).indices
    return by_value.gather(-1, nan_first)[..., :k]


@_op("topk")
def _topk(xs, attrs, node):
    return _topk_order(xs[0], attrs["k"]).to(torch.int32)


@_op("topk_values")
def _topk_values(xs, attrs, node):
    return torch.gather(xs[0], -1, xs[1].long())


@_op("sort_by_key")
def _sort_by_key(xs, attrs, node):
    """A stable sort by the key columns as unsigned words (column 0's low
    ``bits``), least significant key first, each pass stable."""
    rec = xs[0]
    words = rec.to(torch.int64) & 0xFFFFFFFF
    order = torch.arange(rec.shape[0])
    for col in reversed(range(attrs["keys"])):
        key = words[order, col]
        if col == 0:
            key = key & ((1 << attrs["bits"]) - 1)
        order = order[torch.sort(key, stable=True).indices]
    return rec[order]


@_op("repetition_penalty")
def _repetition_penalty(xs, attrs, node):
    """llama.cpp's rule: each distinct id of the history inside [0, V) once,
    its logit divided by the penalty where > 0, else multiplied."""
    x, history, penalty = xs[0], xs[1].long(), xs[2].reshape(-1)[0]
    v = x.shape[-1]
    rows, hist = x.reshape(-1, v), history.reshape(-1, history.shape[-1])
    hit = torch.zeros(rows.shape, dtype=torch.bool)
    for r in range(rows.shape[0]):
        h = hist[r if hist.shape[0] > 1 else 0]
        hit[r, h[(h >= 0) & (h < v)]] = True
    rows = torch.where(hit, torch.where(rows > 0, rows / penalty, rows * penalty), rows)
    return rows.reshape(x.shape)


@_op("glu_linear")
def _glu_linear(xs, attrs, node):
    return _mm(_glu(xs[:2], attrs, node), xs[2], True)


@_op("frames")
def _frames(xs, attrs, node):
    return xs[0].unfold(-1, attrs["frame_length"], attrs["hop"])


# The FFT family in complex128 (the oracle is never the least accurate
# party), rounded to c64 / f32 as rlx stores its results.
def _c128(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.complex128) if x.is_complex() else x.to(torch.float64)


@_op("fft", "ifft")
def _fft(xs, attrs, node):
    return getattr(torch.fft, node.op)(_c128(xs[0]), norm=attrs["norm"]).to(torch.complex64)


@_op("rfft")
def _rfft(xs, attrs, node):
    return torch.fft.rfft(_c128(xs[0]), norm=attrs["norm"]).to(torch.complex64)


@_op("windowed_rfft")
def _windowed_rfft(xs, attrs, node):
    return torch.fft.rfft(_c128(xs[0] * xs[1]), norm=attrs["norm"]).to(torch.complex64)


@_op("windowed_rfft_power")
def _windowed_rfft_power(xs, attrs, node):
    return torch.fft.rfft(_c128(xs[0] * xs[1]), norm=attrs["norm"]).abs().square().to(torch.float32)


@_op("irfft")
def _irfft(xs, attrs, node):
    return torch.fft.irfft(_c128(xs[0]), n=attrs["n"], norm=attrs["norm"]).to(torch.float32)


@_op("dequantize")
def _dequantize(xs, attrs, node):
    return xs[0].clone()   # the leaf already holds the dequantized values


@_op("complex")
def _complex(xs, attrs, node):
    return torch.complex(xs[0], xs[1])


@_op("real")
def _real(xs, attrs, node):
    return xs[0].real


@_op("imag")
def _imag(xs, attrs, node):
    return xs[0].imag


def _mm(a, b, transpose_b):
    if transpose_b:
        b = b.transpose(-1, -2)
    return torch.matmul(a, b)


@_op("matmul")
def _matmul(xs, attrs, node):
    return _mm(xs[0], xs[1], attrs["transpose_b"])


@_op("linear")
def _linear(xs, attrs, node):
    y = _mm(xs[0], xs[1], attrs["transpose_b"])
    if len(xs) == 3:
        y = y + xs[2]
    return _ACT[attrs["activation"]](y)


@_op("glu")
def _glu(xs, attrs, node):
    return _ACT[attrs["activation"]](xs[0]) * xs[1]


@_op("gather")
def _gather(xs, attrs, node):
    return xs[0][xs[1].long()]


@_op("reshape")
def _reshape(xs, attrs, node):
    return xs[0].reshape(tuple(node.shape))


@_op("transpose")
def _transpose(xs, attrs, node):
    return xs[0].permute(*attrs["perm"])


@_op("narrow")
def _narrow(xs, attrs, node):
    return xs[0].narrow(attrs["axis"], attrs["start"], attrs["length"])


@_op("copy")
def _copy(xs, attrs, node):
    return xs[0].clone()


# PyTorch's FP8 conversions round to nearest even like rlx's; their overflow
# rules differ by format (measured, torch 2.13): to float8_e4m3fn finite
# overflows and infinities saturate to +-448, to float8_e5m2 they become
# +-inf. rlx's casts saturate both where asked, and otherwise follow the
# format (e4m3: NaN past the top, which rounds to 448 up to 464; e5m2: inf).
_FP8 = {"f8e4m3": (torch.float8_e4m3fn, 448.0), "f8e5m2": (torch.float8_e5m2, 57344.0)}


def _to_fp8(x: torch.Tensor, fmt: str, saturate: bool) -> torch.Tensor:
    dtype, top = _FP8[fmt]
    if saturate:
        x = torch.where(torch.isnan(x), x, x.clamp(-top, top))
    y = x.to(dtype).to(torch.float32)
    if fmt == "f8e4m3" and not saturate:
        y = torch.where(torch.isinf(x) | (x.abs() > 464.0), torch.full_like(y, math.nan), y)
    return y


@_op("cast")
def _cast(xs, attrs, node):
    if node.dtype.name in _FP8:
        return _to_fp8(xs[0], node.dtype.name, attrs.get("saturate", True))
    return _round(xs[0], node.dtype.name)


def _per_element(scale: torch.Tensor, shape: tuple, block: tuple) -> torch.Tensor:
    """The scale of every element (the reference's expansion of block
    scales, rlx.reference.fp8.scale_full: layout, not arithmetic under test)."""
    return torch.from_numpy(scale_full(scale.numpy(), shape, block))


@_op("scaled_dequantize")
def _scaled_dequantize(xs, attrs, node):
    return (xs[0].double() * _per_element(xs[1], tuple(xs[0].shape), attrs["block"])).to(torch.float32)


@_op("scaled_linear")
def _scaled_linear(xs, attrs, node):
    w = (xs[1].double() * _per_element(xs[2], tuple(xs[1].shape), attrs["block"])).to(torch.float32)
    y = _mm(xs[0], w, True)
    if len(xs) == 4:
        y = y + xs[3]
    return _ACT[attrs["activation"]](y)


@_op("concat")
def _concat(xs, attrs, node):
    return torch.cat(xs, dim=attrs["axis"])


@_op("sum")
def _sum(xs, attrs, node):
    return torch.sum(xs[0], dim=attrs["axis"], keepdim=attrs["keepdims"])


@_op("mean")
def _mean(xs, attrs, node):
    return torch.mean(xs[0], dim=attrs["axis"], keepdim=attrs["keepdims"])


@_op("max")
def _max(xs, attrs, node):
    return torch.amax(xs[0], dim=attrs["axis"], keepdim=attrs["keepdims"])


@_op("argmax")
def _argmax(xs, attrs, node):
    x = xs[0]
    # torch.argmax's tie rule among equal maxima is not documented; make "first" explicit:
    # the first NaN if the row has one, else the first maximum.
    nan = torch.isnan(x)
    key = torch.where(nan, torch.full_like(x, math.inf), x)
    best = torch.amax(key, dim=attrs["axis"], keepdim=True)
    hit = (key == best) & (nan | ~torch.any(nan, dim=attrs["axis"], keepdim=True))
    n = x.shape[attrs["axis"]]
    shape = [1] * x.dim()
    shape[attrs["axis"]] = n
    idx = torch.arange(n).reshape(shape).expand_as(x)
    first = torch.amin(torch.where(hit, idx, torch.full_like(idx, n)), dim=attrs["axis"], keepdim=attrs["keepdims"])
    return first.to(torch.int32)


@_op("rope")
def _rope(xs, attrs, node):
    x, pos = xs
    rd = int(attrs["rotary_dim"])
    half = rd // 2
    inv = (float(attrs["base"]) ** (-2.0 * torch.arange(half, dtype=torch.float64) / rd)).to(torch.float32)
    angle = (pos.to(torch.float32)[..., None] * inv)[..., None, :].to(torch.float64)   # [..., T, 1, half]
    cos, sin = torch.cos(angle), torch.sin(angle)
    x64 = x.to(torch.float64)
    y = x64.clone()
    if attrs["layout"] == "neox":
        a, b = x64[..., :half], x64[..., half:rd]
        y[..., :half] = a * cos - b * sin
        y[..., half:rd] = a * sin + b * cos
    else:
        a, b = x64[..., 0:rd:2], x64[..., 1:rd:2]
        y[..., 0:rd:2] = a * cos - b * sin
        y[..., 1:rd:2] = a * sin + b * cos
    return y.to(torch.float32)


@_op("attention")
def _attention(xs, attrs, node):
    q, k, v = xs[:3]
    b, tq, hq, _ = q.shape
    tk, hkv = k.shape[1], k.shape[2]
    if not xs[-1].is_floating_point():   # an active length L: the keys [0, L) alone, the last query at L - 1
        tk = min(max(int(xs[-1].reshape(-1)[0]), 0), tk)
        k, v = k[:, :tk], v[:, :tk]
        xs = [q, k, v] + [m[..., :tk] if m.shape[-1] > 1 else m for m in xs[3:-1]]
    rep = hq // hkv
    qh = q.permute(0, 2, 1, 3)
    kh = k.permute(0, 2, 1, 3).repeat_interleave(rep, dim=1)
    vh = v.permute(0, 2, 1, 3).repeat_interleave(rep, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) * attrs["scale"]
    if attrs.get("softcap") is not None:
        s = attrs["softcap"] * _in_f64(torch.tanh)(s / attrs["softcap"])
    if len(xs) == 4:
        s = s + xs[3]
    s = s.expand(b, hq, tq, tk)
    qpos = torch.arange(tq)[:, None] + (tk - tq)
    j = torch.arange(tk)[None, :]
    allowed = torch.ones(tq, tk, dtype=torch.bool)
    if attrs.get("causal"):
        allowed &= j <= qpos
    if attrs.get("window") is not None:
        allowed &= (qpos - j) < int(attrs["window"])
    s = torch.where(allowed, s, torch.tensor(-math.inf))
    return torch.matmul(_dead_rows_zero(s), vh).permute(0, 2, 1, 3)


def _round(t: torch.Tensor, dtype: str) -> torch.Tensor:
    """Round a float32 tensor to dtype's precision (stays a float32 tensor)."""
    if dtype == "f16":
        return t.to(torch.float16).to(torch.float32)
    if dtype == "bf16":
        return t.to(torch.bfloat16).to(torch.float32)
    return t


def _to_torch(arr: np.ndarray, dtype: str) -> torch.Tensor:
    arr = np.asarray(arr)
    if dtype in _FP8:   # ml_dtypes codes: their values, exact in f32
        return torch.from_numpy(arr.astype(np.float32))
    if dtype == "bf16":   # stored as raw uint16 bits
        bits = arr.astype(np.uint32) << 16
        return torch.from_numpy(bits.view(np.float32).copy())
    if arr.dtype.kind == "f":
        return torch.from_numpy(np.array(arr, dtype=np.float32, order="C"))
    if arr.dtype.kind == "c":
        return torch.from_numpy(np.array(arr, dtype=np.complex64, order="C"))
    return torch.from_numpy(np.array(arr, order="C"))


def _to_numpy(t: torch.Tensor, dtype) -> np.ndarray:
    if dtype.name in _FP8:   # values already on the format's grid
        return t.numpy().astype(dtype.numpy)
    if dtype.is_float:
        return _round(t, dtype.name).numpy().astype(dtype.numpy)
    return t.numpy().astype(dtype.numpy)


def torch_run(graph, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray] | None = None,
              round_leaves: str | None = None, state: dict | None = None,
              round_nodes: bool = True) -> dict[str, np.ndarray]:
    """Evaluate an rlx graph with PyTorch (float32 compute). ``round_leaves``
    ("f16"/"bf16"): round float inputs, params and constants to that dtype
    first, the way a precision policy stores them (so the comparison measures
    the kernels' work, not the unavoidable input rounding). ``state``: the
    graph's states by name (zeros when missing), written in place by its
    set_rows, so one dict passed to successive runs carries them across.
    ``round_nodes=False`` keeps every value in f32 where an f16 node would
    store f16 (the result the f16 graph approximates; outputs still come
    back in their declared dtype)."""
    params = params or {}
    state = {} if state is None else state
    values: dict = {}
    with torch.no_grad():
        for node in graph.topo_order():
            if node.op == "state":
                name = node.attrs["name"]
                if name not in state:
                    state[name] = torch.zeros(tuple(node.shape), dtype=torch.float32)
                values[node] = state[name]
                continue
            if node.op == "set_rows":
                # rlx.reference's write (indexing only, no arithmetic), on the tensors in place
                values[node] = set_rows_in_place(*(values[x] for x in node.inputs))
                continue
            if node.op in ("input", "param", "constant"):
                if node.op == "constant":
                    arr = node.attrs["value"]
                else:
                    arr = (inputs if node.op == "input" else params)[node.attrs["name"]]
                if node.dtype.quantized:   # block codes: the values gguf's dequantizer gives (the oracle)
                    t = torch.from_numpy(dequantize_values(node.dtype, np.asarray(arr), tuple(node.shape)))
                    t = t.to(torch.float32)
                else:
                    t = _to_torch(arr, node.dtype.name)
                if round_leaves and node.dtype.is_float:
                    t = _round(t, round_leaves)
                values[node] = t
                continue
            fn = TORCH_OPS.get(node.op)
            if fn is None:
                raise KeyError(f"no torch translation for op {node.op!r}")
            out = fn([values[x] for x in node.inputs], node.attrs, node)
            if tuple(out.shape) != tuple(node.shape):
                raise AssertionError(f"torch translation of {node!r} gave shape {tuple(out.shape)}")
            # An f16 node stores f16: the next op reads the rounded value (rlx/reference/'s rule too).
            values[node] = _round(out, "f16") if node.dtype.name == "f16" and round_nodes else out
        return {name: _to_numpy(values[n].clone(), n.dtype) for name, n in graph.outputs.items()}
