"""Attention on the host device against numpy and PyTorch CPU
(torch.nn.functional.scaled_dot_product_attention), same run; the ratio
table prints at the end. No timing assertions.

- bert: B=1, T=128, H=12, D=32 with a [B, 1, 1, T] padding mask (the
  attention of all-MiniLM-L6-v2, ANCHORS.md).
- decode: one query against a 512-entry KV cache, Hq=8 over Hkv=2, D=64
  (a small GQA decoder's decode step; causal is a no-op for the last query).

rlx's time is a whole ``Executable.run`` (input checks, copy in, kernel, copy
out); the peers get their preferred layout ([B, H, T, D]) prepared outside
the timed call.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx

CASES = {
    "bert-1x128x12x32": dict(b=1, tq=128, tk=128, hq=12, hkv=12, d=32, causal=False, mask=True),
    "decode-1x1x512-8q2kv-64": dict(b=1, tq=1, tk=512, hq=8, hkv=2, d=64, causal=True, mask=False),
}


def _inputs(c):
    rng = np.random.default_rng(0)
    ins = {"q": rng.standard_normal((c["b"], c["tq"], c["hq"], c["d"])).astype(np.float32),
           "k": rng.standard_normal((c["b"], c["tk"], c["hkv"], c["d"])).astype(np.float32),
           "v": rng.standard_normal((c["b"], c["tk"], c["hkv"], c["d"])).astype(np.float32)}
    if c["mask"]:
        mask = np.zeros((c["b"], 1, 1, c["tk"]), np.float32)
        mask[..., -16:] = -np.inf       # 16 padding tokens
        ins["mask"] = mask
    return ins


def _rlx_exe(c):
    g = rlx.Graph()
    q = g.input("q", (c["b"], c["tq"], c["hq"], c["d"]))
    k = g.input("k", (c["b"], c["tk"], c["hkv"], c["d"]))
    v = g.input("v", (c["b"], c["tk"], c["hkv"], c["d"]))
    mask = g.input("mask", (c["b"], 1, 1, c["tk"])) if c["mask"] else None
    g.set_outputs(o=g.attention(q, k, v, mask, causal=c["causal"]))
    return g, rlx.compile(g)


def _numpy_attention(q, k, v, mask, rep):
    """[B, H, T, D] inputs; k, v with Hkv heads."""
    if rep > 1:
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1.0 / np.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.matmul(e / e.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("who", ["rlx", "numpy", "torch"])
def test_attention(benchmark, record, case, who):
    c = CASES[case]
    ins = _inputs(c)
    rep = c["hq"] // c["hkv"]
    bhtd = {n: np.ascontiguousarray(ins[n].transpose(0, 2, 1, 3)) for n in "qkv"}
    mask = ins.get("mask")
    if who == "rlx":
        g, exe = _rlx_exe(c)
        out = benchmark(exe.run, ins)["o"]
        np.testing.assert_allclose(out, rlx.run_reference(g, ins)["o"], rtol=1e-4, atol=1e-4)
    elif who == "numpy":
        benchmark(_numpy_attention, bhtd["q"], bhtd["k"], bhtd["v"], mask, rep)
    else:
        torch = pytest.importorskip("torch", reason="PyTorch not installed: peer skipped")
        sdpa = torch.nn.functional.scaled_dot_product_attention
        q, k, v = (torch.from_numpy(bhtd[n]) for n in "qkv")
        m = None if mask is None else torch.from_numpy(mask)
        # The decode step's single query is the last one: causal masks nothing,
        # and torch's is_causal aligns top-left, so it is left off here.
        with torch.inference_mode():
            benchmark(sdpa, q, k, v, attn_mask=m, enable_gqa=rep > 1)
    record(f"attention {case}", who, benchmark)
