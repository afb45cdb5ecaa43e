"""Random graphs of 5-40 nodes built from the patterns the optimizer looks
for: elementwise chains, matmul (+ bias + activation) = linear, layernorm /
rmsnorm after add, GLU, softmax and masked_softmax, reductions broadcast
back, views feeding consumers, the attention chain of rlx/opt/fusion.py
(Q.K^T, scale by a scalar constant, a mask that may broadcast, softmax or
masked_softmax with scale, .V, heads-first transposes of [B, T, H, D]),
RoPE, gather, concat, casts, and outputs that are inputs, views of inputs,
strided views, or params that are also matmul weights.

``model_graph_case(seed)`` (ModelGraphBuilder) builds the same kind of
graph with a model's parts among the motifs, one of them forced per seed: a
sandwich-norm decoder's norms (residual, pre-norm, per-head norm then
RoPE), a log-mel chain (frames, window, rfft, power, filterbank, log),
quantized projections after a norm or a GLU, KV-cache writes and reads
(state, set_rows) carried from one run to the next, and a decode step's
attention over K and V caches written at one slot with an active length.

``graph_case(seed)`` is a pure function of the seed. Seed s always contains
the motif ``FORCED[s % len(FORCED)]`` (so a short run covers each), plus
random others until the graph has its drawn number of nodes. Values are kept
O(1) (``bound`` tracks a rough magnitude; mul and exp get tanh'ed inputs
when it grows), denominators and sqrt arguments are exp(tanh(.)), so the
f32 comparison at 1e-4 is well conditioned."""

from __future__ import annotations

import numpy as np

from .check import Case
from .ops import QUANT_FORMATS, Builder, quant_k, quantized_weight, repro_command

FORCED = ("attention", "input_out", "param_weight_out", "input_view_out", "attention_qbcast", "linear",
          "norm", "glu", "views", "reduce", "attention", "elementwise")
# The model graphs' motifs (ModelGraphBuilder): forced one per seed in turn,
# and drawn beside the classic ones with these weights.
MODEL_FORCED = ("decoder_norms", "spectrum", "quant_linear", "state", "kv_attention")
MODEL_MOTIFS = {"decoder_norms": 2.0, "spectrum": 1.0, "quant_linear": 1.5, "state": 1.0, "kv_attention": 1.0}
_CONST_SCALES = (0.25, 0.125, 0.5, 2.0, 0.35355339)


class GraphBuilder(Builder):
    kind = "graph"
    extra_motifs: dict = {}

    @property
    def forced(self) -> str:
        return FORCED[self.seed % len(FORCED)]

    def __init__(self, seed: int):
        rng = np.random.default_rng([seed, 3])
        super().__init__(rng, "f16" if rng.random() < 0.1 else "f32")
        self.seed = seed
        self.B, self.T = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 3, 4, 5, 7, 8]))
        self.H, self.D = int(rng.choice([1, 2, 3])), int(rng.choice([1, 2, 4, 8, 16]))
        self.C = self.H * self.D
        self.rank3 = rng.random() < 0.8
        self.main = (self.B, self.T, self.C) if self.rank3 else (self.B * self.T, self.C)
        self.pool: list = []            # nodes of shape self.main or (..., F) families
        self.bound: dict = {}
        self.outputs: dict = {}
        self.target = int(rng.integers(5, 41))
        x = self.leaf(self.main)
        self._add(x, 3.0)

    # ---- bookkeeping

    def _add(self, node, bound: float):
        self.bound[node] = bound
        self.pool.append(node)
        return node

    def pick(self, shape=None):
        cands = [n for n in self.pool if shape is None or tuple(n.shape) == tuple(shape)]
        if not cands:
            return None
        # Prefer recent values: longer chains.
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 2
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def main_value(self):
        return self.pick(self.main) or self._add(self.leaf(self.main), 3.0)

    def tame(self, x, limit: float = 6.0):
        """tanh(x) where x may be large, so products and exps stay O(1)."""
        if self.bound.get(x, 3.0) > limit:
            return self._add(self.g.tanh(x), 1.0)
        return x

    def positive(self, x):
        return self._add(self.g.exp(self.g.tanh(x)), 2.8)

    def const(self, value, dtype=None):
        return self.g.constant(np.asarray(value, dtype=np.float16 if (dtype or self.dtype) == "f16" else np.float32))

    def weight(self, k: int, n: int, transpose_b: bool, as_input: bool = False):
        shape = (n, k) if transpose_b else (k, n)
        return self.leaf(shape, "weight", param=not as_input)

    # ---- motifs

    def m_elementwise(self):
        x = self.main_value() if self.rng.random() < 0.6 else self.pick()
        shape = tuple(x.shape)
        op = str(self.rng.choice(["gelu", "gelu_tanh", "silu", "relu", "tanh", "neg", "exp", "sqrt", "rsqrt",
                                  "scale_shift", "add", "sub", "mul", "div", "maximum", "minimum", "add_bcast",
                                  "mul_bcast", "cast", "copy"]))
        g, bx = self.g, self.bound.get(x, 3.0)
        if op in ("gelu", "gelu_tanh"):
            return self._add(g.gelu(x, "tanh" if op == "gelu_tanh" else "none"), bx)
        if op in ("silu", "relu", "neg"):
            return self._add(getattr(g, op)(x), bx)
        if op == "tanh":
            return self._add(g.tanh(x), 1.0)
        if op == "exp":
            return self._add(g.exp(self.tame(x, 3.0)), 20.0 if self.bound.get(x, 3) > 3 else np.e ** bx)
        if op in ("sqrt", "rsqrt"):
            return self._add(getattr(g, op)(self.positive(x)), 1.7)
        if op == "scale_shift":
            s, t = float(self.rng.uniform(-2, 2)), float(self.rng.uniform(-1, 1))
            return self._add(g.scale_shift(x, s, t), bx * abs(s) + abs(t))
        if op == "cast":
            other = "f16" if self.dtype == "f32" else "f32"
            return self._add(g.cast(g.cast(x, other), self.dtype), bx)
        if op == "copy":
            return self._add(g.copy(x), bx)
        if op.endswith("_bcast"):
            y = self.leaf(self.broadcast_of(shape) or (1,), param=bool(self.rng.random() < 0.5)) \
                if self.rng.random() < 0.7 else self.const(self.rng.uniform(0.5, 1.5))
            if op == "add_bcast":
                return self._add(g.add(x, y) if self.rng.random() < 0.5 else g.add(y, x), bx + 3)
            return self._add(g.mul(self.tame(x), y), 3 * min(bx, 6))
        y = self.pick(shape)
        by = self.bound.get(y, 3.0)
        if op == "div":
            return self._add(g.div(x, self.positive(y)), bx * 2.8)
        if op == "mul":
            x, y = self.tame(x), self.tame(y)
            return self._add(g.mul(x, y), min(bx, 6) * min(by, 6))
        return self._add(getattr(g, op)(x, y), bx + by)

    def m_linear(self, x=None, n=None, back: bool = True):
        x = x if x is not None else self.main_value()
        k = x.shape[-1]
        n = n or int(self.rng.choice([k, 2 * k, 7, 33, 1]))
        tb = bool(self.rng.random() < 0.5)
        w = self.weight(k, n, tb, as_input=bool(self.rng.random() < 0.15))
        g = self.g
        bias = self.leaf((n,), param=True) if self.rng.random() < 0.6 else None
        act = str(self.rng.choice(["none", "gelu", "gelu_tanh", "silu", "relu"]))
        if self.rng.random() < 0.2:   # the fused op, written directly
            y = g.linear(x, w, bias, activation=None if act == "none" else act, transpose_b=tb)
        else:
            y = g.matmul(x, w, transpose_b=tb)
            if bias is not None:
                y = g.add(y, bias) if self.rng.random() < 0.7 else g.add(bias, y)
            if act != "none":
                y = g.gelu(y, "tanh" if act == "gelu_tanh" else "none") if act.startswith("gelu") \
                    else getattr(g, act)(y)
        y = self._add(y, self.bound.get(x, 3.0) + 3)
        if back and n != self.main[-1] and self.rng.random() < 0.7:
            return self.m_linear(y, self.main[-1], back=False)
        return y

    def m_siblings(self):
        """Projections of one input with compile-time weights (q/k/v, gate/up)."""
        x = self.main_value()
        n = int(self.rng.choice([x.shape[-1], 5, 16]))
        ys = [self.m_linear(x, n, back=False) for _ in range(int(self.rng.integers(2, 4)))]
        return self._add(self.g.add(ys[0], ys[1]), 12.0)

    def m_norm(self):
        x = self.main_value()
        c = x.shape[-1]
        if c == 2:   # a norm over 2 near-equal values is ill-conditioned (seen: seed 21358, f16)
            return self.m_elementwise()
        g = self.g
        w = self.leaf((c,), "norm_weight", param=True)
        kind = str(self.rng.choice(["ln_add", "rms_add", "ln", "rms", "add_ln", "add_rms", "manual_rms"]))
        r = self.pick(tuple(x.shape))
        if kind == "ln_add":
            y = g.layernorm(g.add(x, r), w, self.leaf((c,), param=True))
        elif kind == "rms_add":
            y = g.rmsnorm(g.add(x, r), w, add_one=bool(self.rng.random() < 0.3))
        elif kind == "ln":
            y = g.layernorm(x, w, self.leaf((c,), param=True), eps=1e-5)
        elif kind == "rms":
            y = g.rmsnorm(x, w)
        elif kind == "add_ln":
            y = g.add_layernorm(x, r, w, self.leaf((c,), param=True))
        elif kind == "add_rms":
            y = g.add_rmsnorm(x, r, w)
        else:
            x = self.tame(x)
            ms = g.mean(g.mul(x, x), axis=-1, keepdims=True)
            y = g.mul(g.mul(x, g.rsqrt(g.add(ms, self.const(1e-3)))), w)
        return self._add(y, 6.0)

    def m_decoder_norms(self):
        """A sandwich-norm decoder's norms, the patterns rlx/opt/fusion.py
        fuses: r + rmsnorm(o, w) (rmsnorm_add), sometimes the next block's
        pre-norm of that sum too (rmsnorm_add_rmsnorm, both values read on),
        and a projection's per-head norm over D then RoPE (rmsnorm_rope, two
        of them sometimes: the sibling ropes pass)."""
        g, rng = self.g, self.rng
        o = self.tame(self.main_value())
        c = o.shape[-1]
        if c == 2:   # a norm over 2 near-equal values is ill-conditioned (m_norm)
            return self.m_elementwise()
        r = self.pick(tuple(o.shape))
        normed = g.rmsnorm(o, self.leaf((c,), "norm_weight", param=True), add_one=bool(rng.random() < 0.5))
        s = self._add(g.add(r, normed) if rng.random() < 0.5 else g.add(normed, r), self.bound.get(r, 3.0) + 3.0)
        if rng.random() < 0.5:
            self._add(g.rmsnorm(s, self.leaf((c,), "norm_weight", param=True), add_one=bool(rng.random() < 0.5)),
                      3.0)
        # (D > 2: a per-head norm over 2 values is ill-conditioned under f16, as m_norm's c == 2;
        # seed 10098 under precision="f16")
        if self.rank3 and self.D % 2 == 0 and self.D > 2 and rng.random() < 0.5:
            pos = self.leaf((self.T,), "pos", dtype="i32")
            layout = str(rng.choice(["neox", "interleaved"]))
            for _ in range(int(rng.integers(1, 3))):
                # A plain projection (a q or k one): an activation's tail
                # (gelu of x ~ -3, a few 1e-3) in every element of a head
                # makes its f16 norm ill-conditioned (seeds 802925, 803972).
                proj = g.matmul(self.pool[-1], self.weight(self.C, self.C, True), transpose_b=True)
                x4 = g.reshape(proj, (self.B, self.T, self.H, self.D))
                y = g.rope(g.rmsnorm(x4, self.leaf((self.D,), "norm_weight", param=True)), pos, layout=layout)
                self._add(g.reshape(y, self.main), 3.0)
        return self.pool[-1]

    def m_quant_linear(self):
        """A decode step's quantized projection (its weight a GGUF block
        format): x from a residual norm (the norm-GEMV fold on GPUs), a GLU
        (the GLU-GEMV fold) or a plain projection to a row of whole blocks.
        x is scaled by 1 / (max |w| sqrt(k)) before the fold's pattern
        starts (the residual and the last norm's weight, the GLU's up
        operand), so the product stays O(1) and the graph's f16 forms do
        not overflow where PyTorch's f32 ones would not."""
        g, rng = self.g, self.rng
        fmt = str(rng.choice([f for f in QUANT_FORMATS if f != "bf16"]))   # bf16: ops.py's _quant says why
        k = quant_k(self, fmt)
        w, largest = quantized_weight(self, self.C, k, fmt)
        c = 1.0 / max(largest * np.sqrt(k), 1e-6)
        x = self.tame(self.m_linear(self.main_value(), k, back=False))
        kind = rng.random()
        if kind < 0.4:
            def norm_weight(scale: float):
                value = (1.0 + 0.1 * rng.standard_normal(k)) * scale
                return self.leaf((k,), value=value.astype(np.float16 if self.dtype == "f16" else np.float32),
                                 param=True)

            second = rng.random() < 0.5
            r = self.tame(self.m_linear(self.main_value(), k, back=False))
            x = g.add(r if second else g.mul(r, self.const(c)), g.rmsnorm(x, norm_weight(1.0 if second else c)))
            if second:
                x = g.rmsnorm(x, norm_weight(c))
        elif kind < 0.7:
            up = self.tame(self.m_linear(self.main_value(), k, back=False))
            x = g.glu(x, g.mul(up, self.const(c)), str(rng.choice(["silu", "gelu", "gelu_tanh"])))
        else:
            x = g.mul(x, self.const(c))
        bias = self.leaf((self.C,), param=True) if rng.random() < 0.4 else None
        return self._add(g.linear(x, w, bias), 3.0)

    def m_state(self):
        """A KV cache: a state of R rows, written by set_rows at a run-time
        (start, count) (negative starts, a count past the rows given and a
        ring that wraps included), read back through set_rows' result by a
        product with the values written. A case's runs share the executable,
        so the second run reads the first one's rows too."""
        g, rng = self.g, self.rng
        x = self.tame(self.main_value())
        rows = int(np.prod(x.shape[:-1]))
        values = g.reshape(x, (rows, self.C)) if len(x.shape) != 2 else x
        r = int(rng.choice([1, 2, 3, 5, 8, 17]))
        cache = g.state(f"cache{len(self.leaves)}", (r, self.C), self.dtype)
        after = g.set_rows(cache, values, self.leaf((2,), f"slot:{r}:{rows}", dtype="i32"))
        if rng.random() < 0.3:
            self.outputs[f"cache{len(self.outputs)}"] = after
        y = self._add(g.matmul(values, after, transpose_b=True), 3.0 * self.C)
        self.outputs[f"scores{len(self.outputs)}"] = y   # its shape is not the main one's: keep it live
        return y

    def m_kv_attention(self):
        """A decode step's attention over its KV cache: K and V rows of two
        projections written into two states at one run-time slot (the
        lowering pairs them into one set_rows_pair dispatch), then the
        queries' attention over the caches' rows read back through the
        writes, with a run-time active length and sometimes causal or a
        window; the result comes back to the main shape."""
        if not self.rank3:
            return self.m_state()
        g, rng = self.g, self.rng
        x = self.tame(self.main_value())
        rows, h, d = self.B * self.T, self.H, self.D
        r = int(rng.choice([1, 3, 8, 17, 33]))
        hkv = int(rng.choice([k for k in (1, h) if h % k == 0]))
        slot = self.leaf((2,), f"slot:{r}:{rows}", dtype="i32")
        caches = []
        for _ in range(2):   # K, then V
            proj = g.matmul(x, self.weight(self.C, hkv * d, True), transpose_b=True)
            state = g.state(f"kv{len(self.leaves)}", (r, hkv, d), self.dtype)
            after = g.set_rows(state, g.reshape(proj, (rows, hkv, d)), slot)
            caches.append(g.reshape(after, (1, r, hkv, d)))
        q = g.reshape(g.matmul(x, self.weight(self.C, self.C, True), transpose_b=True), (1, rows, h, d))
        y = g.attention(q, *caches, causal=bool(rng.random() < 0.4),
                        window=None if rng.random() < 0.7 else int(rng.integers(1, r + 2)),
                        length=self.leaf((1,), f"length:{r}", dtype="i32"))
        return self._add(g.reshape(y, self.main), 3.0)

    def m_spectrum(self):
        """A log-mel front end's chain (f32 graphs: the FFT family's dtype):
        frames of a signal (a strided view), a window (rfft of the product
        fuses into windowed_rfft), the power from the real and imaginary
        views, a filterbank matmul, log(1 + .)."""
        if self.dtype != "f32":
            return self.m_elementwise()
        g, rng = self.g, self.rng
        x = self.tame(self.main_value())
        length = x.shape[-1]
        n = int(rng.integers(1, length + 1))
        frames = g.frames(x, n, int(rng.integers(1, n + 2)))
        window = self.leaf((n,), "norm_weight", param=bool(rng.random() < 0.7))
        spec = g.rfft(g.mul(frames, window) if rng.random() < 0.5 else g.mul(window, frames))
        re, im = g.real(spec), g.imag(spec)
        power = g.add(g.mul(re, re), g.mul(im, im))
        mel = g.matmul(power, self.leaf((n // 2 + 1, int(rng.choice([1, 3, 8]))), "positive", param=True))
        y = self._add(g.log(g.add(mel, self.const(1.0))), 4.0)
        self.outputs[f"mel{len(self.outputs)}"] = y   # its shape is the main one's only by chance: keep it live
        return y

    def m_glu(self):
        x = self.main_value()
        f = int(self.rng.choice([x.shape[-1], 2 * x.shape[-1], 9]))
        gate = self.m_linear(x, f, back=False)
        up = self.m_linear(x, f, back=False)
        act = str(self.rng.choice(["silu", "gelu", "gelu_tanh"]))
        g = self.g
        if self.rng.random() < 0.25:
            y = g.glu(gate, up, act)
        else:
            a = g.silu(gate) if act == "silu" else g.gelu(gate, "tanh" if act == "gelu_tanh" else "none")
            y = g.mul(a, up) if self.rng.random() < 0.5 else g.mul(up, a)
        y = self._add(y, 30.0)
        return self.m_linear(self.tame(y), x.shape[-1], back=False)

    def m_softmax(self):
        x = self.tame(self.pick(), 8.0)
        g = self.g
        if self.rng.random() < 0.5:
            return self._add(g.softmax(x), 1.0)
        mask = None
        if self.rng.random() < 0.6:
            mask = self.leaf(self.broadcast_of(tuple(x.shape)) or (1,), "live_mask")
        return self._add(g.masked_softmax(x, mask, scale=float(self.rng.choice([1.0, 0.5, 2.0]))), 1.0)

    def m_reduce(self):
        x = self.tame(self.main_value())
        g = self.g
        kind = str(self.rng.choice(["center", "sum_back", "max_back", "reduce_out", "argmax_out"]))
        if kind == "center":
            return self._add(g.sub(x, g.mean(x, axis=-1, keepdims=True)), 2.0)
        if kind == "sum_back":
            s = g.sum(x, axis=-1, keepdims=True)
            return self._add(g.add(x, g.scale_shift(s, 1.0 / x.shape[-1])), 2.0)
        if kind == "max_back":
            axis = int(self.rng.integers(len(x.shape)))
            return self._add(g.sub(x, g.max(x, axis=axis, keepdims=True)), 2.0)
        if kind == "reduce_out":
            op = str(self.rng.choice(["sum", "mean", "max"]))
            axis = int(self.rng.integers(len(x.shape)))
            self.outputs[f"r{len(self.outputs)}"] = getattr(g, op)(x, axis=axis, keepdims=bool(self.rng.random() < .5))
            return x
        leaf = self.leaf(self.main)          # argmax of exact input values: no near ties
        self.outputs[f"am{len(self.outputs)}"] = g.argmax(leaf, axis=int(self.rng.integers(len(self.main))))
        return x

    def m_views(self):
        x = self.main_value()
        g = self.g
        kind = str(self.rng.choice(["transpose", "narrow_concat", "reshape", "concat_linear"]))
        rank = len(x.shape)
        if kind == "transpose" and rank >= 2:
            perm = list(range(rank))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            t = g.transpose(x, perm)
            other = self.leaf(tuple(t.shape)) if self.rng.random() < 0.5 else g.transpose(self.pick(x.shape), perm)
            y = g.add(g.gelu(t), other)
            return self._add(g.transpose(y, perm), self.bound.get(x, 3.0) + 3)
        if kind == "narrow_concat" and x.shape[-1] >= 2:
            c = x.shape[-1]
            cut = int(self.rng.integers(1, c))
            a, b = g.narrow(x, -1 + rank, 0, cut), g.narrow(x, rank - 1, cut, c - cut)
            return self._add(g.concat([g.silu(b), a], axis=-1), self.bound.get(x, 3.0))
        if kind == "concat_linear":
            y = self.pick(tuple(x.shape))
            cat = g.concat([x, y], axis=-1)
            return self.m_linear(cat, self.main[-1], back=False)
        flat = g.reshape(x, (-1,))
        return self._add(g.reshape(g.scale_shift(flat, 0.5, 0.1), tuple(x.shape)), self.bound.get(x, 3.0))

    def m_gather(self):
        v = int(self.rng.choice([3, 10, 50]))
        table = self.leaf((v, self.C), param=bool(self.rng.random() < 0.7))
        idx = self.leaf(self.main[:-1], f"index:{v}", dtype=str(self.rng.choice(["i32", "i64"])))
        return self._add(self.g.gather(table, idx), 3.0)

    def _heads(self, x4):
        return self.g.transpose(x4, (0, 2, 1, 3))

    def m_attention(self, q_bcast: bool = False):
        g, rng = self.g, self.rng
        B, T, H, D = self.B, self.T, self.H, self.D
        from_main = self.rank3 and not q_bcast and rng.random() < 0.6
        tq = 1 if q_bcast else T
        if from_main:
            x = self.main_value()
            q, k, v = (g.reshape(self.m_linear(x, self.C, back=False), (B, T, H, D)) for _ in range(3))
        else:
            q = self.leaf((B, tq, H, D))
            k, v = self.leaf((B, T, H, D)), self.leaf((B, T, H, D))
        if rng.random() < 0.25 and D % 2 == 0:
            pos = self.leaf((T,), "pos", dtype="i32")
            if not q_bcast:
                q = g.rope(q, pos, layout=str(rng.choice(["neox", "interleaved"])))
            k = g.rope(k, pos)
        qh, vh = self._heads(q), self._heads(v)
        if rng.random() < 0.5:
            s = g.matmul(qh, self._heads(k), transpose_b=True)
        else:
            s = g.matmul(qh, g.transpose(k, (0, 2, 3, 1)))
        scale_kind = str(rng.choice(["mul", "rmul", "div", "none"]))
        c = float(rng.choice(_CONST_SCALES))
        if scale_kind == "mul":
            s = g.mul(s, self.const(c))
        elif scale_kind == "rmul":
            s = g.mul(self.const(c), s)
        elif scale_kind == "div":
            s = g.div(s, self.const(1.0 / c))
        mask = None
        if q_bcast:
            tm = int(rng.choice([2, 3, 5]))
            mask = self.leaf((int(rng.choice([1, B])), int(rng.choice([1, H])), tm, T), "live_mask")
        elif rng.random() < 0.7:
            full = (B, H, T, T)
            mshape = [d if rng.random() < 0.5 else 1 for d in full]
            mshape = mshape[int(rng.integers(0, 3)):] if rng.random() < 0.3 else mshape
            mask = self.leaf(tuple(mshape), "live_mask")
        soft = str(rng.choice(["softmax", "masked_after_add", "masked_with_mask"]))
        mscale = float(rng.choice([1.0, 2.0, 0.5]))
        if mask is not None and soft != "masked_with_mask":
            s = g.add(s, mask) if rng.random() < 0.7 else g.add(mask, s)
        if soft == "softmax":
            p = g.softmax(s)
        elif soft == "masked_after_add" or mask is None:
            p = g.masked_softmax(s, None, scale=mscale)
        else:
            p = g.masked_softmax(s, mask, scale=mscale) if len(mask.shape) <= 4 and \
                tuple(np.broadcast_shapes(tuple(mask.shape), tuple(s.shape))) == tuple(s.shape) else \
                g.masked_softmax(g.add(s, mask), None, scale=mscale)
        if tuple(p.shape[:2]) != tuple(vh.shape[:2]):
            # The mask broadcast batch or heads beyond V's: not an attention; stop at the probabilities.
            self.outputs[f"probs{len(self.outputs)}"] = p
            return self.main_value()
        o = g.matmul(p, vh)                                         # [B, H, Tq', D]
        ot = g.transpose(o, (0, 2, 1, 3))
        if tuple(ot.shape[:2]) == (B, T) and self.rank3:
            return self._add(g.reshape(ot, self.main), 3.0)
        self.outputs[f"att{len(self.outputs)}"] = ot if rng.random() < 0.5 else g.reshape(ot, (-1,))
        return self.main_value()

    def m_attention_qbcast(self):
        return self.m_attention(q_bcast=True)

    # ---- output motifs

    def m_input_out(self):
        x = self.leaf(self.main)
        y = self.pick(self.main) or self.main_value()
        self.outputs[f"in{len(self.outputs)}"] = x
        return self._add(self.g.add(self.g.tanh(self.g.exp(self.tame(y, 3.0))), x), 12.0)

    def m_input_view_out(self):
        x = self.leaf(self.main)
        flat = (int(np.prod(self.main)),)
        self.outputs[f"inview{len(self.outputs)}"] = self.g.reshape(x, flat) if self.rng.random() < 0.7 else \
            self.g.narrow(x, len(self.main) - 1, 0, max(1, self.C - 1))
        return self._add(self.g.add(self.main_value(), x), 6.0)

    def m_param_weight_out(self):
        x = self.main_value()
        k = x.shape[-1]
        tb = bool(self.rng.random() < 0.5)
        w = self.weight(k, k, tb)
        self.outputs[f"w{len(self.outputs)}"] = w
        y = self.g.matmul(x, w, transpose_b=tb)
        if self.rng.random() < 0.5:
            y = self.g.add(y, self.leaf((k,), param=True))
        return self._add(y, self.bound.get(x, 3.0) + 3)

    def build(self) -> Case:
        motifs = {"elementwise": 6, "linear": 3, "siblings": 1, "norm": 2, "glu": 1, "softmax": 1.5,
                  "reduce": 1, "views": 2, "gather": 0.5, "attention": 1.5, "attention_qbcast": 0.3,
                  "input_out": 0.5, "input_view_out": 0.5, "param_weight_out": 0.7, **self.extra_motifs}
        names, weights = list(motifs), np.array(list(motifs.values()))
        getattr(self, f"m_{self.forced}")()
        while len(self.g.nodes) < self.target:
            getattr(self, "m_" + names[int(self.rng.choice(len(names), p=weights / weights.sum()))])()
        outs = dict(self.outputs)
        outs["y"] = self.pool[-1]
        for n in self.rng.choice(len(self.pool), size=min(len(self.pool), int(self.rng.integers(0, 3))),
                                 replace=False):
            node = self.pool[int(n)]
            if node not in outs.values() or self.rng.random() < 0.3:   # sometimes one node under two names
                outs[f"o{int(n)}"] = node
        if self.rng.random() < 0.15 and self.pool[-1].shape[-1] > 1:     # a strided view as an output
            y = self.pool[-1]
            outs["strided"] = self.g.narrow(y, len(y.shape) - 1, 1, y.shape[-1] - 1)
        self.notes.append(f"graph seed {self.seed}: dtype {self.dtype}, B={self.B} T={self.T} H={self.H} "
                          f"D={self.D}, main {self.main}, forced motif {self.forced!r}")
        case = self.case(outs, self.seed)
        case.repro = repro_command(self.kind, self.seed)
        return case


class ModelGraphBuilder(GraphBuilder):
    """The same graphs with a model's parts among the motifs: a
    sandwich-norm decoder's norms, a log-mel chain, quantized projections
    (a separate builder so that every seed of GraphBuilder keeps the graph
    it had when the fuzzer's notes and tests named it)."""

    kind = "model_graph"
    extra_motifs = MODEL_MOTIFS

    @property
    def forced(self) -> str:
        return MODEL_FORCED[self.seed % len(MODEL_FORCED)]


def graph_case(seed: int) -> Case:
    return GraphBuilder(seed).build()


def model_graph_case(seed: int) -> Case:
    return ModelGraphBuilder(seed).build()
