"""Transformer blocks built from primitive ops only (matmul, add, mul,
softmax, layernorm, ...), the way a model exporter would emit them. The
optimizer's tests and benchmarks use them to check that fusion finds the
fused ops and that fused and unfused graphs agree."""

from __future__ import annotations

import math

import numpy as np

from rlx.ir.graph import Graph, Node


def _dense(g: Graph, x: Node, prefix: str, d_in: int, d_out: int, bias: bool = True) -> Node:
    y = g.matmul(x, g.param(f"{prefix}.w", (d_in, d_out), x.dtype))
    return g.add(y, g.param(f"{prefix}.b", (d_out,), x.dtype)) if bias else y


def _heads_first(g: Graph, x: Node, batch: int, seq: int, heads: int, head_dim: int) -> Node:
    return g.transpose(g.reshape(x, (batch, seq, heads, head_dim)), (0, 2, 1, 3))


def bert_layer(g: Graph, x: Node, mask: Node | None, prefix: str, heads: int, ffn: int) -> Node:
    """One post-norm BERT encoder layer on x [B, T, H]; mask: additive
    [B, 1, 1, T] (or None)."""
    batch, seq, hidden = x.shape
    hd = hidden // heads
    q, k, v = (_heads_first(g, _dense(g, x, f"{prefix}.{n}", hidden, hidden), batch, seq, heads, hd)
               for n in ("q", "k", "v"))
    scores = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
    scores = g.mul(scores, g.constant(np.array(1.0 / math.sqrt(hd), np.float32).astype(x.dtype.numpy)))
    if mask is not None:
        scores = g.add(scores, mask)
    ctx = g.matmul(g.softmax(scores), v)
    ctx = g.reshape(g.transpose(ctx, (0, 2, 1, 3)), (batch, seq, hidden))
    h = g.layernorm(g.add(_dense(g, ctx, f"{prefix}.o", hidden, hidden), x),
                    g.param(f"{prefix}.ln1.w", (hidden,), x.dtype), g.param(f"{prefix}.ln1.b", (hidden,), x.dtype))
    f = _dense(g, g.gelu(_dense(g, h, f"{prefix}.ffn1", hidden, ffn)), f"{prefix}.ffn2", ffn, hidden)
    return g.layernorm(g.add(f, h), g.param(f"{prefix}.ln2.w", (hidden,), x.dtype),
                       g.param(f"{prefix}.ln2.b", (hidden,), x.dtype))


def decoder_layer(g: Graph, x: Node, mask: Node, prefix: str, heads: int, ffn: int) -> Node:
    """One pre-norm (LLaMA-style) decoder layer: RMSNorm, attention with an
    additive causal mask [1, 1, T, T], residual, RMSNorm, SwiGLU MLP,
    residual."""
    batch, seq, hidden = x.shape
    hd = hidden // heads
    h = g.rmsnorm(x, g.param(f"{prefix}.rms1", (hidden,), x.dtype))
    q, k, v = (_heads_first(g, _dense(g, h, f"{prefix}.{n}", hidden, hidden, bias=False), batch, seq, heads, hd)
               for n in ("q", "k", "v"))
    scores = g.mul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))),
                   g.constant(np.array(1.0 / math.sqrt(hd), np.float32).astype(x.dtype.numpy)))
    ctx = g.matmul(g.softmax(g.add(scores, mask)), v)
    ctx = g.reshape(g.transpose(ctx, (0, 2, 1, 3)), (batch, seq, hidden))
    x = g.add(x, _dense(g, ctx, f"{prefix}.o", hidden, hidden, bias=False))
    h = g.rmsnorm(x, g.param(f"{prefix}.rms2", (hidden,), x.dtype))
    gate = _dense(g, h, f"{prefix}.gate", hidden, ffn, bias=False)
    up = _dense(g, h, f"{prefix}.up", hidden, ffn, bias=False)
    return g.add(x, _dense(g, g.mul(g.silu(gate), up), f"{prefix}.down", ffn, hidden, bias=False))


def causal_mask(seq: int, dtype=np.float32) -> np.ndarray:
    return np.triu(np.full((seq, seq), -np.inf, np.float32), 1).astype(dtype).reshape(1, 1, seq, seq)


def random_params(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights scaled like a trained model's (unit-variance activations);
    norms' weights near 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, node in g.params.items():
        shape = tuple(node.shape)
        if name.endswith((".w", ".b")) and len(shape) == 2:
            value = rng.standard_normal(shape) / math.sqrt(shape[0])
        elif "ln" in name or "rms" in name:
            value = (1.0 + 0.1 * rng.standard_normal(shape)) if name.endswith((".w", "1", "2")) else \
                0.1 * rng.standard_normal(shape)
        else:
            value = 0.1 * rng.standard_normal(shape)
        out[name] = value.astype(node.dtype.numpy)
    return out


def bert_encoder(layers: int = 6, batch: int = 1, seq: int = 128, hidden: int = 384, heads: int = 12,
                 ffn: int = 1536, masked: bool = True, dtype: str = "f32") -> Graph:
    g = Graph()
    x = g.input("x", (batch, seq, hidden), dtype)
    mask = g.input("mask", (batch, 1, 1, seq), dtype) if masked else None
    for i in range(layers):
        x = bert_layer(g, x, mask, f"l{i}", heads, ffn)
    g.set_outputs(y=x)
    return g
