"""Random single-op cases: the ops of the graph builder (rlx/ir/graph.py),
odd sizes, broadcasting, operands that are non-contiguous views
(transpose / narrow / reshape of a larger input; index and position operands
too), f32 and f16, and with
``special=True`` NaN / +-inf in the inputs.

``op_case(seed, special)`` is a pure function of its arguments: the op is
``OP_NAMES[seed % len(OP_NAMES)]`` and every other choice comes from an rng
seeded with (seed, special)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import rlx

from .check import Case

DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 17, 33, 65)
LAST_DIMS = DIMS + (128, 130)
MAX_NUMEL = 1 << 14


def repro_command(kind: str, seed: int, special: bool = False) -> str:
    """The one command that re-runs the case of this kind and seed."""
    test = {"op": "test_op_special_values" if special else "test_op", "graph": "test_random_graph",
            "model_graph": "test_random_model_graph", "splat": "test_splat_frame", "signal": "test_signal_transform",
            "log_mel": "test_log_mel", "llm": "test_llm_model", "bert": "test_bert_embedder",
            "serve": "test_serve_request"}[kind]
    return f".venv/bin/python -m pytest tests/fuzz/test_fuzz.py -k {test} --fuzz-seed {seed} --fuzz-runs 1"


class Builder:
    """A graph under construction plus how to draw values for its leaves."""

    def __init__(self, rng: np.random.Generator, dtype: str = "f32", special: bool = False):
        self.rng, self.dtype, self.special = rng, dtype, special
        self.g = rlx.Graph()
        self.leaves: dict[str, tuple[tuple[int, ...], str, str, bool]] = {}   # name -> shape, kind, dtype, param
        self.fixed: dict[str, np.ndarray] = {}                                 # leaves with one value for all runs
        self.notes: list[str] = []

    # ---- shapes

    def dim(self, last: bool = False) -> int:
        return int(self.rng.choice(LAST_DIMS if last else DIMS))

    def shape(self, rank: int | None = None, budget: int = MAX_NUMEL) -> tuple[int, ...]:
        rank = int(self.rng.integers(1, 5)) if rank is None else rank
        while True:
            s = tuple(self.dim(last=i == rank - 1) for i in range(rank))
            if int(np.prod(s)) <= budget:
                return s

    def broadcast_of(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts to `shape` (dims set to 1, leading dims dropped)."""
        drop = int(self.rng.integers(0, len(shape) + 1)) if self.rng.random() < 0.3 else 0
        s = [1 if self.rng.random() < 0.35 else d for d in shape[drop:]]
        return tuple(s)

    # ---- leaves and views

    def leaf(self, shape, kind: str = "normal", dtype: str | None = None, param: bool = False,
             value: np.ndarray | None = None):
        dtype = dtype or self.dtype
        name = f"{'p' if param else 'x'}{len(self.leaves)}"
        self.leaves[name] = (tuple(shape), kind, dtype, param)
        if value is not None:
            self.fixed[name] = value
        return (self.g.param if param else self.g.input)(name, tuple(shape), dtype)

    def value(self, shape, kind: str = "normal", dtype: str | None = None, view: bool = True,
              param: bool = False):
        """A node of `shape`: a plain leaf, or (view=True, sometimes) a
        transpose / narrow / reshape of a differently shaped leaf."""
        shape = tuple(shape)
        r = self.rng.random() if view and shape else 1.0
        if r < 0.2 and len(shape) >= 2:
            perm = tuple(int(p) for p in self.rng.permutation(len(shape)))
            inv = tuple(int(i) for i in np.argsort(perm))
            src = self.leaf(tuple(shape[p] for p in inv), kind, dtype, param)
            return self.g.transpose(src, perm)            # [shape[inv[perm[i]]]] = shape
        if r < 0.4:
            axis = int(self.rng.integers(len(shape)))
            extra = int(self.rng.integers(1, 4))
            start = int(self.rng.integers(0, extra + 1))
            big = list(shape)
            big[axis] += extra
            return self.g.narrow(self.leaf(big, kind, dtype, param), axis, start, shape[axis])
        if r < 0.5 and int(np.prod(shape)) > 1:
            return self.g.reshape(self.leaf((int(np.prod(shape)),), kind, dtype, param), shape)
        return self.leaf(shape, kind, dtype, param)

    def const_like(self, value: float):
        """A scalar constant in the graph's float dtype."""
        return self.g.constant(np.asarray(value, dtype=np.float16 if self.dtype == "f16" else np.float32))

    # ---- data

    def data(self, rng: np.random.Generator, shape, kind: str, dtype: str) -> np.ndarray:
        if kind in ("normal", "finite"):             # finite: never given special values
            a = rng.standard_normal(shape)
        elif kind == "positive":                     # sqrt, rsqrt: away from 0
            a = rng.uniform(0.25, 4.0, shape)
        elif kind == "nonzero":                      # div denominators
            a = rng.choice((-1.0, 1.0), shape) * rng.uniform(0.5, 2.0, shape)
        elif kind == "bounded":                      # exp
            a = rng.uniform(-4.0, 4.0, shape)
        elif kind == "weight":                       # matmul weights: unit-variance products
            k = shape[0] if len(shape) else 1
            a = rng.standard_normal(shape) / np.sqrt(max(k, 1))
        elif kind == "norm_weight":
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif kind in ("mask", "live_mask"):          # additive mask: 0 or large negative, some -inf
            masked = rng.random(shape) < 0.25
            big = -np.inf if rng.random() < 0.5 else -1e4
            a = np.where(masked, big, 0.0)
            if rng.random() < 0.4:                   # a real-valued bias (ALiBi-like) on the live entries
                a = a + rng.standard_normal(shape)
            # Key 0 never masked: for live_mask no row is all -inf; for a
            # finite mask, a row whose every key is at -1e4 leaves f32 ~1e-3
            # of its logits (their ulp there), which rlx and PyTorch round
            # apart by more than the f32 tolerance (seed 586044). Rows all
            # at -inf stay: the dead-row rule (zeros) is checked with them.
            if (kind == "live_mask" or np.isfinite(big)) and a.ndim:
                a[..., 0] = 0.0
        elif kind.startswith("index"):               # "index:V"
            v = int(kind.split(":")[1])
            return rng.integers(0, v, shape).astype(np.int64 if dtype == "i64" else np.int32)
        elif kind == "bits":                         # any 32-bit words, with many repeats (ties)
            return rng.choice(rng.integers(-2**31, 2**31, 16, dtype=np.int64), shape).astype(np.int32) \
                if rng.random() < 0.5 else rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
        elif kind.startswith("length"):              # attention's active length: "length:Tk"
            tk = int(kind.split(":")[1])
            return np.array([rng.integers(-1, tk + 2)], np.int32)
        elif kind.startswith("slot"):                # set_rows' (start, count): "slot:R:T"
            r, t = (int(v) for v in kind.split(":")[1:])
            return np.array([rng.integers(-2 * r, 3 * r + 1), rng.integers(-1, t + 2)], np.int32)
        elif kind.startswith("pos"):                 # rope positions
            return rng.integers(0, 4096, shape).astype(np.int32)
        else:
            raise ValueError(kind)
        a = np.asarray(a, np.float64)
        if self.special and kind not in ("weight", "norm_weight", "finite") and a.size:
            a = self._inject(rng, a, kind)
        with np.errstate(over="ignore"):
            return a.astype(np.float16 if dtype == "f16" else np.float32)

    def _inject(self, rng, a: np.ndarray, kind: str) -> np.ndarray:
        a = a.copy()
        flat = a.reshape(-1)
        n = max(1, int(flat.size * rng.uniform(0.02, 0.15)))
        idx = rng.choice(flat.size, size=min(n, flat.size), replace=False)
        flat[idx] = rng.choice((np.nan, np.inf, -np.inf, np.nan), size=idx.size)
        if kind == "positive" and rng.random() < 0.5:    # sqrt of negatives: NaN
            flat[rng.choice(flat.size, size=max(1, flat.size // 10))] = -1.0
        if a.ndim and rng.random() < 0.3:                 # a whole row of one special value
            row = tuple(int(rng.integers(d)) for d in a.shape[:-1])
            a[row] = rng.choice((np.nan, np.inf, -np.inf))
        return a

    def case(self, outputs: dict, seed: int, runs: int = 2) -> Case:
        self.g.set_outputs(outputs)
        drng = np.random.default_rng([seed, 7])
        params = {n: self.fixed.get(n, self.data(drng, s, k, d)) for n, (s, k, d, p) in self.leaves.items() if p}
        inputs = [{n: self.fixed.get(n, self.data(drng, s, k, d)) for n, (s, k, d, p) in self.leaves.items()
                   if not p} for _ in range(runs)]
        return Case(self.g, inputs, params, repro_command("op", seed, self.special), self.notes)


# ---------------------------------------------------------------- the cases

OpGen = Callable[[Builder], dict]
OP_GENS: dict[str, OpGen] = {}


def _gen(*names: str):
    def deco(fn):
        for n in names:
            OP_GENS[n] = fn
        return fn
    return deco


_UNARY_KIND = {"sqrt": "positive", "rsqrt": "positive", "log": "positive", "exp": "bounded"}


def _unary(name: str) -> OpGen:
    def gen(b: Builder) -> dict:
        x = b.value(b.shape(), _UNARY_KIND.get(name, "normal"))
        if name == "gelu":
            return {"y": b.g.gelu(x, approximate=str(b.rng.choice(["none", "tanh"])))}
        if name == "scale_shift":
            return {"y": b.g.scale_shift(x, float(b.rng.uniform(-3, 3)), float(b.rng.uniform(-2, 2)))}
        if name == "cast":
            to = "f16" if b.dtype == "f32" else "f32"
            return {"y": b.g.cast(x, to)}
        return {"y": getattr(b.g, name)(x)}
    return gen


for _n in ("relu", "tanh", "exp", "log", "neg", "sqrt", "rsqrt", "silu", "gelu", "scale_shift", "copy", "cast"):
    OP_GENS[_n] = _unary(_n)


def _binary(name: str) -> OpGen:
    def gen(b: Builder) -> dict:
        out = b.shape()
        sa, sb = out, b.broadcast_of(out)
        if b.rng.random() < 0.5:
            sa, sb = sb, sa
        x = b.value(sa)
        y = b.value(sb, "nonzero" if name == "div" else "normal")
        if name == "maximum" and b.rng.random() < 0.3:
            y = x    # max(x, x)
        return {"y": getattr(b.g, name)(x, y)}
    return gen


for _n in ("add", "sub", "mul", "div", "maximum", "minimum"):
    OP_GENS[_n] = _binary(_n)


@_gen("softmax")
def _softmax(b: Builder) -> dict:
    return {"y": b.g.softmax(b.value(b.shape()))}


@_gen("masked_softmax")
def _masked_softmax(b: Builder) -> dict:
    shape = b.shape()
    x = b.value(shape)
    scale = float(b.rng.choice([1.0, 0.125, 0.5, 2.0, -1.0]))
    mask = None if b.rng.random() < 0.3 else b.value(b.broadcast_of(shape) or (1,), "mask")
    if mask is not None and len(mask.shape) > len(shape):
        mask = None
    return {"y": b.g.masked_softmax(x, mask, scale=scale)}


@_gen("layernorm", "add_layernorm")
def _layernorm(b: Builder) -> dict:
    shape = b.shape()
    x = b.value(shape)
    w, bias = b.value(shape[-1:], "norm_weight", param=True), b.value(shape[-1:], param=True)
    eps = float(b.rng.choice([1e-5, 1e-6, 1e-3]))
    if b.rng.random() < 0.5:
        return {"y": b.g.add_layernorm(x, b.value(shape), w, bias, eps=eps)}
    return {"y": b.g.layernorm(x, w, bias, eps=eps)}


@_gen("rmsnorm", "add_rmsnorm")
def _rmsnorm(b: Builder) -> dict:
    shape = b.shape()
    x = b.value(shape)
    w = b.value(shape[-1:], "norm_weight", param=bool(b.rng.random() < 0.7))
    eps, add_one = float(b.rng.choice([1e-6, 1e-5])), bool(b.rng.random() < 0.3)
    if b.rng.random() < 0.5:
        return {"y": b.g.add_rmsnorm(x, b.value(shape), w, eps=eps, add_one=add_one)}
    return {"y": b.g.rmsnorm(x, w, eps=eps, add_one=add_one)}


@_gen("rmsnorm_add", "rmsnorm_add_rmsnorm")
def _rmsnorm_add(b: Builder) -> dict:
    """A sandwich-norm decoder's post-norm residual x + rmsnorm(o, w), and
    with a second weight the next block's pre-norm of that sum too."""
    shape = b.shape()
    o, x = b.value(shape), b.value(shape)
    w = b.value(shape[-1:], "norm_weight", param=bool(b.rng.random() < 0.7))
    kw = dict(eps=float(b.rng.choice([1e-6, 1e-5])), add_one=bool(b.rng.random() < 0.5))
    if b.rng.random() < 0.5:
        return {"y": b.g.rmsnorm_add(o, x, w, **kw)}
    w_next = b.value(shape[-1:], "norm_weight", param=bool(b.rng.random() < 0.7))
    s, h = b.g.rmsnorm_add_rmsnorm(o, x, w, w_next, next_eps=float(b.rng.choice([1e-6, 1e-5])),
                                   next_add_one=bool(b.rng.random() < 0.5), **kw)
    return {"s": s, "h": h}


def _rope_operands(b: Builder) -> tuple:
    """x [(B,) T, H, D] (a view sometimes) and i32 positions [T] or [B, T]
    for rope and rmsnorm_rope; returns (x, positions, D)."""
    t, h = b.dim(), int(b.rng.choice([1, 2, 3, 4]))
    d = int(b.rng.choice([2, 4, 8, 16, 34, 64]))
    batch = () if b.rng.random() < 0.3 else (int(b.rng.choice([1, 2, 3])),)
    x = b.value(batch + (t, h, d))
    pos = b.value((t,) if not batch or b.rng.random() < 0.5 else (batch[0], t), "pos", dtype="i32")
    return x, pos, d


@_gen("rmsnorm_rope")
def _rmsnorm_rope(b: Builder) -> dict:
    """Per-head query/key norm then RoPE; sometimes a second weight for the
    heads from some head on (a query's and a key's heads in one x)."""
    x, pos, d = _rope_operands(b)
    h = x.shape[-2]
    w = b.value((d,), "norm_weight", param=bool(b.rng.random() < 0.7))
    two = h > 1 and b.rng.random() < 0.5
    return {"y": b.g.rmsnorm_rope(x, pos, w, eps=float(b.rng.choice([1e-6, 1e-5])),
                                  add_one=bool(b.rng.random() < 0.5),
                                  base=float(b.rng.choice([10000.0, 1e6, 100.0])),
                                  layout=str(b.rng.choice(["neox", "interleaved"])),
                                  rotary_dim=None if b.rng.random() < 0.5 else int(b.rng.choice(range(2, d + 1, 2))),
                                  weight_b=b.value((d,), "norm_weight", param=True) if two else None,
                                  weight_b_from=int(b.rng.integers(1, h)) if two else None)}


@_gen("topk")
def _topk(b: Builder) -> dict:
    shape = b.shape()
    k = int(b.rng.integers(1, min(shape[-1], 256) + 1))
    values, indices = b.g.topk(b.value(shape), k)
    return {"values": values, "indices": indices}


@_gen("repetition_penalty")
def _repetition_penalty(b: Builder) -> dict:
    """Logits [..., V], a history of ids (some repeated, some outside [0, V):
    padding), a penalty above or below 1."""
    shape = b.shape()
    v = shape[-1]
    per_row = len(shape) > 1 and b.rng.random() < 0.5
    hist_shape = (shape[:-1] if per_row else ()) + (int(b.rng.integers(1, 40)),)
    history = b.value(hist_shape, f"index:{v + 3}", dtype="i32")   # ids up to V + 2: some outside the row
    penalty = b.leaf((1,), "finite", dtype="f32", value=np.array([b.rng.choice([1.3, 0.7, 1.0, 2.5])], np.float32))
    return {"y": b.g.repetition_penalty(b.value(shape), history, penalty)}


@_gen("glu_linear")
def _glu_linear(b: Builder) -> dict:
    lead = b.shape(int(b.rng.integers(0, 3)), budget=2048)
    k, n = b.dim(True), b.dim(True)
    gate, up = b.value(lead + (k,)), b.value(lead + (k,))
    w = b.value((n, k), "weight", param=bool(b.rng.random() < 0.8))
    return {"y": b.g.glu_linear(gate, up, w, str(b.rng.choice(["silu", "gelu", "gelu_tanh"])))}


@_gen("frames")
def _frames(b: Builder) -> dict:
    shape = b.shape(int(b.rng.integers(1, 3)))
    length = int(b.rng.integers(1, shape[-1] + 1))
    hop = int(b.rng.integers(1, length + 2))
    y = b.g.frames(b.value(shape), length, hop)
    outs = {"frames": y}
    if b.rng.random() < 0.6:        # a consumer that reads the strided view
        outs["y"] = b.g.mul(y, b.value(b.broadcast_of(tuple(y.shape)) or (1,)))
    return outs


# Transform lengths: powers of two, odd and prime lengths (mixed radix,
# Bluestein), Whisper's 400, and a few above 4096 (the multi-pass path).
FFT_LENGTHS = (1, 2, 3, 5, 7, 8, 16, 17, 33, 64, 65, 100, 128, 130, 400, 512, 1000, 1024, 4096, 4097, 8192)


def _signal(b: Builder) -> tuple:
    n = int(b.rng.choice(FFT_LENGTHS))
    lead = b.shape(int(b.rng.integers(0, 3)), budget=max(1, MAX_NUMEL // n)) if b.rng.random() < 0.7 else ()
    return lead + (n,)


def _transform(op: str) -> OpGen:
    """A transform along the last axis, inputs f32 (the family's only real
    dtype) or c64 from two f32 parts, which may be views; every norm mode;
    outputs c64 as they are, or their real and imaginary parts (views)."""
    return lambda b: _fft(b, op)


def _fft(b: Builder, op: str) -> dict:
    norm = b.rng.choice([None, "backward", "ortho", "forward"])
    norm = None if norm is None else str(norm)
    shape = _signal(b)
    if op in ("fft", "ifft"):
        x = b.value(shape, "finite", dtype="f32")
        if b.rng.random() < 0.7:
            x = b.g.complex(x, b.value(shape, "finite", dtype="f32"))
        y = getattr(b.g, op)(x, norm)
    elif op == "rfft":
        y = b.g.rfft(b.value(shape, "finite", dtype="f32"), norm)
    elif op in ("windowed_rfft", "windowed_rfft_power"):
        window = b.value(shape[-1:], "norm_weight", dtype="f32", param=bool(b.rng.random() < 0.5))
        y = getattr(b.g, op)(b.value(shape, "finite", dtype="f32"), window, norm)
        if op == "windowed_rfft_power":
            return {"y": y}
    else:   # irfft of a half spectrum of M points; n the default 2 (M - 1), or odd, or padding / truncating
        m = max(2, shape[-1] // 2 + 1)
        half = shape[:-1] + (m,)
        x = b.g.complex(b.value(half, "finite", dtype="f32"), b.value(half, "finite", dtype="f32"))
        n = b.rng.choice([None, 2 * m - 1, int(b.rng.integers(1, 3 * m))])
        y = b.g.irfft(x, None if n is None else int(n), norm)
        return {"y": y}
    if b.rng.random() < 0.5:
        return {"y": y}
    return {"re": b.g.real(y), "im": b.g.imag(y)}


for _n in ("fft", "ifft", "rfft", "irfft", "windowed_rfft", "windowed_rfft_power"):
    OP_GENS[_n] = _transform(_n)


# GGUF block formats the quantized cases draw from (tests/ops/quant_helpers.py
# fills their blocks with random codes and moderate scales).
QUANT_FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs",
                 "iq3_s", "iq4_nl", "iq4_xs", "tq2_0", "mxfp4", "nvfp4", "bf16")


def quantized_weight(b: Builder, n: int, k: int, fmt: str) -> tuple:
    """A param [n, k] of block format fmt, filled with random valid blocks,
    and the largest magnitude among its values (up to ~1e3: the blocks'
    scales and codes are drawn to exercise every code, not to be O(1))."""
    from rlx.ir.dtype import quantized
    from rlx.reference.blocks import dequantize_values
    from tests.ops.quant_helpers import random_blocks

    dtype = quantized(fmt)
    blocks = random_blocks(fmt, n, k, b.rng).view(dtype.numpy)   # bf16 is stored as uint16 words
    largest = float(np.abs(dequantize_values(dtype, blocks, (n, k))).max(initial=0.0))
    return b.leaf((n, k), "finite", dtype=dtype, param=True, value=blocks), largest


def quant_k(b: Builder, fmt: str) -> int:
    """A row length the format takes: whole blocks, sometimes several."""
    from rlx.ir.dtype import quantized

    return quantized(fmt).block * int(b.rng.choice([1, 2, 3]))


@_gen("quant_linear", "quant_dequantize", "quant_gather")
def _quant(b: Builder) -> dict:
    """A quantized weight as a linear's B operand (1 to 9 rows of x: the
    decode GEMV, its small-m form, dequantize + gemm), dequantized, or as a
    gathered table."""
    r = b.rng.random()
    # bf16 weights in a linear: the host's AVX-512 BF16 gemm rounds x to bf16
    # too (docs/compile.md), a bound of its own that
    # tests/ops/test_quant.py holds it to; here bf16 is dequantized and gathered.
    fmt = str(b.rng.choice([f for f in QUANT_FORMATS if r >= 0.6 or f != "bf16"]))
    k, n = quant_k(b, fmt), int(b.rng.choice([1, 3, 8, 13, 33]))
    w, _ = quantized_weight(b, n, k, fmt)
    if r < 0.6:
        rows = int(b.rng.choice([1, 1, 2, 3, 8, 9]))
        lead = (rows,) if b.rng.random() < 0.7 else (1, rows)
        bias = b.value((n,), param=True) if b.rng.random() < 0.5 else None
        act = b.rng.choice([None, "gelu", "silu"])
        return {"y": b.g.linear(b.value(lead + (k,)), w, bias, activation=None if act is None else str(act))}
    if r < 0.8:
        return {"y": b.g.dequantize(w, b.dtype)}
    idx = b.value(b.shape(int(b.rng.integers(1, 3)), budget=64), f"index:{n}", dtype="i32")
    return {"y": b.g.gather(w, idx)}


FP8_FORMATS = ("f8e4m3", "f8e5m2")


def fp8_codes(b: Builder, shape: tuple, fmt: str, param: bool):
    """A leaf of FP8 codes: normal values times 8 rounded (saturating) to
    the format, with NaN and the infinities e5m2 has among them for special
    cases."""
    from rlx.ir.dtype import DType
    from rlx.reference.fp8 import encode

    dtype = DType.of(fmt)
    values = b.rng.standard_normal(shape) * 8.0
    if b.special and values.size:
        flat = values.reshape(-1)
        flat[b.rng.choice(flat.size, size=max(1, flat.size // 20))] = b.rng.choice(
            [np.nan, np.inf, -np.inf] if fmt == "f8e5m2" else [np.nan])
    codes = encode(values, dtype.numpy, saturate=not b.special)
    return b.leaf(shape, "finite", dtype=dtype, param=param, value=np.asarray(codes).reshape(shape))


def fp8_scale(b: Builder, shape: tuple) -> tuple:
    """An f32 scale for FP8 values of ``shape`` at a random granularity:
    (leaf, block), block None for per tensor or per row."""
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    kind = b.rng.choice(["tensor", "row", "block"] if len(shape) == 2 else ["tensor", "row"])
    if kind == "tensor":
        sshape, block = (1,), None
    elif kind == "row":
        sshape, block = tuple(shape[:-1]) or (1,), None
    else:
        block = (int(b.rng.choice([1, 2, 3, 8, 128])), int(b.rng.choice([1, 2, 5, 16, 128])))
        sshape = (-(-rows // block[0]), -(-shape[-1] // block[1]))
    value = b.rng.uniform(0.01, 0.2, sshape).astype(np.float32)
    return b.leaf(sshape, "finite", dtype="f32", param=bool(b.rng.random() < 0.7), value=value), block


@_gen("fp8_cast")
def _fp8_cast(b: Builder) -> dict:
    """Casts to FP8 with and without saturation, the codes as an output
    themselves or cast back to the graph's float dtype."""
    fmt, saturate = str(b.rng.choice(FP8_FORMATS)), bool(b.rng.random() < 0.5)
    shape = b.shape()
    x = b.value(shape)
    if b.rng.random() < 0.5:   # values spread over the format's range, past it at the top
        x = b.g.mul(x, b.value((1,), "finite", param=True) if b.rng.random() < 0.5 else b.const_like(300.0))
    codes = b.g.cast(x, fmt, saturate=saturate)
    return {"codes": codes} if b.rng.random() < 0.4 else {"y": b.g.cast(codes, b.dtype)}


@_gen("scaled_linear", "scaled_dequantize")
def _scaled(b: Builder) -> dict:
    """An FP8 weight with its scales (per tensor, per row, or 2-D blocks) in
    a linear (x in the graph's float dtype, or FP8 codes with their own
    scales: the FP8 x FP8 product), or dequantized."""
    fmt = str(b.rng.choice(FP8_FORMATS))
    if b.rng.random() < 0.35:
        shape = b.shape(int(b.rng.integers(1, 4)))
        codes = fp8_codes(b, shape, fmt, param=bool(b.rng.random() < 0.5))
        scale, block = fp8_scale(b, shape)
        return {"y": b.g.scaled_dequantize(codes, scale, str(b.rng.choice(["f32", "f16"])), block=block)}
    n, k = b.dim(True), b.dim(True)
    w = fp8_codes(b, (n, k), fmt, param=True)
    scale, block = fp8_scale(b, (n, k))
    lead = b.shape(int(b.rng.integers(0, 3)), budget=512)
    with_bias = b.rng.random() < 0.5
    act = b.rng.choice([None, "gelu", "silu", "relu"])
    act = None if act is None else str(act)
    if b.rng.random() < 0.3:   # FP8 x, one scale per tensor or per row of x: dequantized to f32 first
        x = fp8_codes(b, lead + (k,), str(b.rng.choice(FP8_FORMATS)), param=False)
        xs_shape = (1,) if b.rng.random() < 0.5 or not lead else lead
        x_scale = b.leaf(xs_shape, "finite", dtype="f32", value=b.rng.uniform(0.01, 0.2, xs_shape).astype(np.float32))
        bias = b.value((n,), dtype="f32", param=True) if with_bias else None
        y = b.g.scaled_linear(x, w, scale, bias, act, block=block, x_scale=x_scale)
    else:
        bias = b.value((n,), param=True) if with_bias else None
        y = b.g.scaled_linear(b.value(lead + (k,)), w, scale, bias, act, block=block)
    return {"y": y}


@_gen("sort_by_key")
def _sort_by_key(b: Builder) -> dict:
    """The device radix sort: i32 records [n, c] (views too) stably sorted
    by their first 1 or 2 columns as unsigned words, only the low ``bits``
    of column 0 counting; the other columns ride along."""
    n, c = int(b.rng.choice([1, 2, 7, 33, 130, 1000, 4097])), int(b.rng.integers(1, 5))
    keys = int(b.rng.integers(1, min(c, 2) + 1))
    bits = int(b.rng.choice([1, 3, 8, 16, 31, 32]))
    rec = b.value((n, c), "bits", dtype="i32")
    return {"y": b.g.op("sort_by_key", (rec,), keys=keys, bits=bits)}


@_gen("linear")
def _linear(b: Builder) -> dict:
    lead = b.shape(int(b.rng.integers(0, 3)), budget=2048)
    k, n = b.dim(True), b.dim(True)
    tb = bool(b.rng.random() < 0.7)
    x = b.value(lead + (k,))
    w = b.value((n, k) if tb else (k, n), "weight", param=bool(b.rng.random() < 0.8))
    bias = b.value((n,), param=True) if b.rng.random() < 0.6 else None
    act = b.rng.choice([None, "gelu", "gelu_tanh", "silu", "relu"])
    return {"y": b.g.linear(x, w, bias, activation=None if act is None else str(act), transpose_b=tb)}


@_gen("glu")
def _glu(b: Builder) -> dict:
    shape = b.shape()
    return {"y": b.g.glu(b.value(shape), b.value(shape), str(b.rng.choice(["silu", "gelu", "gelu_tanh"])))}


@_gen("matmul")
def _matmul(b: Builder) -> dict:
    m, k, n = b.dim(), b.dim(True), b.dim(True)
    batch = b.shape(int(b.rng.integers(0, 3)), budget=64)
    tb = bool(b.rng.random() < 0.4)
    bs = (n, k) if tb else (k, n)
    shared_b = b.rng.random() < 0.5          # 2-D b broadcast over a's batch dims
    x = b.value(batch + (m, k))
    w = b.value(bs if shared_b else batch + bs, "weight", param=shared_b and b.rng.random() < 0.5)
    return {"y": b.g.matmul(x, w, transpose_b=tb)}


@_gen("gather")
def _gather(b: Builder) -> dict:
    v, d = b.dim(), b.dim(True)
    table = b.value((v, d), param=bool(b.rng.random() < 0.5))
    idt = str(b.rng.choice(["i32", "i64"]))
    idx = b.value(b.shape(int(b.rng.integers(1, 3)), budget=256), f"index:{v}", dtype=idt)
    return {"y": b.g.gather(table, idx)}


@_gen("reshape", "transpose", "narrow")
def _views(b: Builder) -> dict:
    shape = b.shape(int(b.rng.integers(2, 5)))
    x = b.value(shape)
    r = b.rng.random()
    if r < 0.33:
        y = b.g.transpose(x, tuple(int(p) for p in b.rng.permutation(len(shape))))
    elif r < 0.66:
        axis = int(b.rng.integers(len(shape)))
        start = int(b.rng.integers(shape[axis]))
        y = b.g.narrow(x, axis, start, int(b.rng.integers(1, shape[axis] - start + 1)))
    else:
        y = b.g.reshape(x, tuple(b.rng.permutation(list(shape))) if b.rng.random() < 0.5 else (-1,))
    outs = {"view": y}
    if b.rng.random() < 0.6:        # a consumer that reads the view
        outs["y"] = b.g.add(y, b.value(b.broadcast_of(tuple(y.shape)) or (1,)))
    return outs


@_gen("concat")
def _concat(b: Builder) -> dict:
    shape = b.shape(int(b.rng.integers(1, 4)))
    axis = int(b.rng.integers(len(shape)))
    parts = []
    for _ in range(int(b.rng.integers(1, 5))):
        s = list(shape)
        s[axis] = b.dim()
        parts.append(b.value(s))
    return {"y": b.g.concat(parts, axis=axis - len(shape) if b.rng.random() < 0.5 else axis)}


def _reduce(name: str) -> OpGen:
    def gen(b: Builder) -> dict:
        shape = b.shape()
        axis = int(b.rng.integers(len(shape)))
        keep = bool(b.rng.random() < 0.5)
        return {"y": getattr(b.g, name)(b.value(shape), axis=axis, keepdims=keep)}
    return gen


for _n in ("sum", "mean", "max", "argmax"):
    OP_GENS[_n] = _reduce(_n)


@_gen("attention")
def _attention(b: Builder) -> dict:
    bsz, tq, tk = int(b.rng.choice([1, 2, 3])), b.dim(), b.dim()
    if b.rng.random() < 0.3:   # a decode step: one query row over many keys
        tq, tk = 1, int(b.rng.choice([17, 65, 130, 300]))
    hkv = int(b.rng.choice([1, 2, 3]))
    hq = hkv * int(b.rng.choice([1, 2, 4]))
    d, dv = int(b.rng.choice([1, 4, 8, 16, 33, 64])), int(b.rng.choice([1, 8, 16, 33]))
    if bsz * max(tq, tk) * hq * max(d, dv) > MAX_NUMEL:
        tq, tk = min(tq, 17), min(tk, 17)
    # V stays finite: the fused kernel skips keys of probability exactly 0, so
    # a NaN in V at a masked key does not reach the output there (docs/kernels.md,
    # "NaN and infinities"), where PyTorch's 0 x NaN would.
    q, k = b.value((bsz, tq, hq, d)), b.value((bsz, tk, hkv, d))
    v = b.value((bsz, tk, hkv, dv), "finite")
    mask = None
    if b.rng.random() < 0.5:
        mask = b.value(b.broadcast_of((bsz, hq, tq, tk)) or (1,), "mask")
    kw = dict(causal=bool(b.rng.random() < 0.3),
              scale=None if b.rng.random() < 0.5 else float(b.rng.uniform(0.05, 1.0)),
              softcap=None if b.rng.random() < 0.7 else float(b.rng.choice([5.0, 30.0])),
              window=None if b.rng.random() < 0.7 else int(b.rng.integers(1, tk + 2)))
    if b.rng.random() < 0.3:   # a KV cache's run-time active length (-1 to Tk + 1: clamped)
        kw["length"] = b.leaf((1,), f"length:{tk}", dtype="i32")
    return {"y": b.g.attention(q, k, v, mask, **kw)}


@_gen("rope")
def _rope(b: Builder) -> dict:
    x, pos, d = _rope_operands(b)
    rd = int(b.rng.choice([r for r in range(2, d + 1, 2)]))
    return {"y": b.g.rope(x, pos, base=float(b.rng.choice([10000.0, 500000.0, 100.0])),
                          layout=str(b.rng.choice(["neox", "interleaved"])),
                          rotary_dim=None if b.rng.random() < 0.5 else rd)}


OP_NAMES = tuple(sorted(OP_GENS))


def op_case(seed: int, special: bool = False) -> Case:
    name = OP_NAMES[seed % len(OP_NAMES)]
    rng = np.random.default_rng([seed, int(special)])
    b = Builder(rng, str(rng.choice(["f32", "f16"])), special)
    outs = OP_GENS[name](b)
    b.notes.append(f"op: {name}, dtype {b.dtype}, special values: {special}")
    return b.case(outs, seed)
