"""Attention against rlx/reference/attention.py on the device under test;
then the CPU's gemm path for long sequences, and NaN scores against PyTorch
(tests/ops/helpers.py).

Tolerances (conftest.TOL): f32 rtol/atol 1e-5. The kernel and the reference
both compute scores, softmax and P @ V in float32 and differ only in
summation order (dot products of up to 256 terms, sums over up to 513 keys:
~1e-6 relative). f16: rtol/atol 2e-3. Both sides read the same f16 inputs
and do f32 math, so the results differ by f32 reassociation (~1e-6) plus at
most one f16 rounding of the output: one f16 ulp is 2^-10 ~ 9.8e-4
relative, inside 2e-3.

The CPU runs every group with one thread; the kernels' parallel logic (group
reductions, the barrier before P @ V) is what a GPU run checks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import TOL, assert_matches_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx
from rlx.errors import DTypeError, GraphError, ShapeError
from rlx.lowering import attention as lowering_attention

from .helpers import DTYPES
from .helpers import check_nan_semantics as _check
from .helpers import kernels_of as _kernels
from .helpers import np_dtype as _np
from .helpers import np_dtype as _np_dtype
from .helpers import packed_qkv_graph as _packed_qkv_graph
from .helpers import rand as _rand
from .helpers import to_torch as _t

pytestmark = pytest.mark.usefixtures("fused_attention_kernel")   # tests/ops/conftest.py
_SPLIT_KEYS = lowering_attention.split_keys                       # before that fixture replaces it
_GQA_SPLIT_KEYS = lowering_attention.gqa_split_keys


def _attention_graph(b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask_shape=None, **kw):
    dv = d if dv is None else dv
    g = rlx.Graph()
    q = g.input("q", (b, tq, hq, d), dtype)
    k = g.input("k", (b, tk, hkv, d), dtype)
    v = g.input("v", (b, tk, hkv, dv), dtype)
    mask = None if mask_shape is None else g.input("mask", mask_shape, dtype)
    g.set_outputs(o=g.attention(q, k, v, mask, **kw))
    return g


def _attention_inputs(rng, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None):
    dv = d if dv is None else dv
    ins = {"q": _rand(rng, (b, tq, hq, d), dtype), "k": _rand(rng, (b, tk, hkv, d), dtype),
           "v": _rand(rng, (b, tk, hkv, dv), dtype)}
    if mask is not None:
        ins["mask"] = mask.astype(_np(dtype))
    return ins


def _check_attention(rng, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None, **kw):
    g = _attention_graph(b, tq, tk, hq, hkv, d, dv, dtype, None if mask is None else mask.shape, **kw)
    exe, got = assert_matches_reference(g, _attention_inputs(rng, b, tq, tk, hq, hkv, d, dv, dtype, mask))
    assert _kernels(exe) == [f"attention_{dtype}"]
    return got["o"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [32, 64, 80, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_head_dims(rng, d, dtype, causal):
    _check_attention(rng, 2, 9, 9, 4, 4, d, dtype=dtype, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", [1, 513])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sequence_lengths(rng, t, dtype, causal):
    _check_attention(rng, 1, t, t, 2, 1, 64, dtype=dtype, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tk", [1, 37, 513])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_decode_gqa(rng, tk, dtype, causal):
    """One new query against a KV cache, 8 query heads over 2 kv heads."""
    _check_attention(rng, 2, 1, tk, 8, 2, 64, dtype=dtype, causal=causal)


def _force_split(monkeypatch, keys: int, merged: bool = True) -> None:
    """Keys per split of the split-K decode kernels, whatever the device and
    rows; merged: split and merge in one dispatch (attention_split_merge, not
    on Metal) or the two kernels (Metal's form)."""
    monkeypatch.setattr(lowering_attention, "split_keys", lambda lw, rows, tk: keys if tk > keys else 0)
    monkeypatch.setattr(lowering_attention, "split_merge", lambda lw: merged and lw.target.backend != "metal")


def _split_kernels(dtype: str, merged: bool) -> list[str]:
    """The split-K kernels a graph runs (the tests run on cpu and cuda, where
    the one-dispatch form exists)."""
    return [f"attention_split_merge_{dtype}"] if merged else [f"attention_split_{dtype}", f"attention_merge_{dtype}"]


def _force_form(monkeypatch, form: str, keys: int, dtype: str) -> list[str]:
    """Run attention as `form` ("fused", "split": a group per query row,
    "gqa": a group per KV head's query heads) in chunks of `keys`, whatever
    the device and shapes; the kernels that the graph then runs."""
    if form in ("split", "split2"):   # split2: split and merge as two dispatches
        _force_split(monkeypatch, keys, merged=form == "split")
        return _split_kernels(dtype, form == "split")
    if form == "gqa":
        monkeypatch.setattr(lowering_attention, "gqa_split_keys", lambda lw, b, tq, hq, hkv, tk: keys)
        return [f"attention_split_gqa_{dtype}", f"attention_merge_{dtype}"]
    return [f"attention_{dtype}"]


def _check_split(rng, monkeypatch, keys, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None, merged=True,
                 **kw):
    _force_split(monkeypatch, keys, merged)
    g = _attention_graph(b, tq, tk, hq, hkv, d, dv, dtype, None if mask is None else mask.shape, **kw)
    exe, got = assert_matches_reference(g, _attention_inputs(rng, b, tq, tk, hq, hkv, d, dv, dtype, mask))
    want = _split_kernels(dtype, merged) if tk > keys else [f"attention_{dtype}"]
    assert _kernels(exe) == want
    if merged and tk > keys:   # a second run: the per-row counts are back at zero
        ins = _attention_inputs(np.random.default_rng(7), b, tq, tk, hq, hkv, d, dv, dtype, mask)
        want_again = rlx.run_reference(g, ins)["o"].astype(np.float64)
        np.testing.assert_allclose(exe.run(ins)["o"].astype(np.float64), want_again, **TOL[dtype])
    return got["o"]


def _check_split2(rng, monkeypatch, keys, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None, **kw):
    return _check_split(rng, monkeypatch, keys, b, tq, tk, hq, hkv, d, dv, dtype, mask, merged=False, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keys", [1, 5, 64, 128])
@pytest.mark.parametrize("tk", [1, 7, 130, 513])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("merged", [True, False], ids=["one_dispatch", "two_dispatches"])
def test_attention_split_decode_gqa(rng, monkeypatch, keys, tk, dtype, causal, merged):
    """Split-K decoding: one query per head (8 over 2 kv heads, head dim
    256 as Gemma 3's) against a cache cut into chunks of `keys`, the last
    chunk partial; split and merge in one dispatch and in two."""
    _check_split(rng, monkeypatch, keys, 2, 1, tk, 8, 2, 256, dtype=dtype, causal=causal, merged=merged)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keys", [3, 16, 20])
@pytest.mark.parametrize("merged", [True, False], ids=["one_dispatch", "two_dispatches"])
def test_attention_split_one_value_feature(rng, monkeypatch, dtype, keys, merged):
    """A value dim of 1 (fewer value features than a GPU group's threads,
    one a thread on the CPU), masked keys, chunks of 3, 16 and 20 keys."""
    tk = 45
    mask = np.zeros((1, 1, 1, tk), np.float32)
    mask[..., 5:9] = -np.inf
    ins = _attention_inputs(rng, 1, 1, tk, 3, 1, 7, 1, dtype, mask)
    _force_split(monkeypatch, keys, merged)
    g = _attention_graph(1, 1, tk, 3, 1, 7, 1, dtype, mask.shape)
    exe, got = assert_matches_reference(g, ins)
    assert _kernels(exe) == _split_kernels(dtype, merged) and np.isfinite(got["o"]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("merged", [True, False], ids=["one_dispatch", "two_dispatches"])
def test_attention_split_masks_window_softcap(rng, monkeypatch, dtype, merged):
    """A decode mask (keys past the active length at -inf, as rlx.models.llm
    feeds them) with whole chunks masked, a window, softcap, Tq > 1 and a
    value dim that differs: every option the fused kernel takes."""
    tk = 77
    mask = np.zeros((2, 1, 3, tk), np.float32)
    mask[0, ..., 20:] = -np.inf            # chunks 3.. of batch 0 hold no key
    mask[1, ..., :40] = -np.inf            # the first chunks of batch 1 hold none
    mask[1, ..., 60] = 0.5
    _check_split(rng, monkeypatch, 8, 2, 3, tk, 4, 1, 48, dv=24, dtype=dtype, mask=mask, causal=True,
                 window=30, softcap=5.0, scale=0.3, merged=merged)
    everywhere = np.full((1, 1, 1, tk), -np.inf, np.float32)
    out = _check_split(rng, monkeypatch, 8, 1, 1, tk, 2, 2, 16, dtype=dtype, mask=everywhere, merged=merged)
    assert not np.any(out)                 # a row masked everywhere: zeros


def _check_gqa(rng, monkeypatch, keys, b, tq, tk, hq, hkv, d, dv=None, dtype="f32", mask=None, **kw):
    want = _force_form(monkeypatch, "gqa", keys, dtype)
    g = _attention_graph(b, tq, tk, hq, hkv, d, dv, dtype, None if mask is None else mask.shape, **kw)
    exe, got = assert_matches_reference(g, _attention_inputs(rng, b, tq, tk, hq, hkv, d, dv, dtype, mask))
    assert _kernels(exe) == want
    return got["o"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("group", [1, 2, 3, 4, 7, 8, 12])
@pytest.mark.parametrize("d, keys, tk", [(256, 128, 513), (256, 64, 130), (37, 5, 7), (40, 8, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_gqa_split_groups(rng, monkeypatch, dtype, group, d, keys, tk, causal):
    """The grouped-query split kernel: `group` query heads over each of 2
    KV heads (in passes of 8, 4, 2 and 1 heads: 3, 7 and 12 take several),
    head dims 256 (Gemma 3) and odd, key counts that leave a partial chunk."""
    _check_gqa(rng, monkeypatch, keys, 2, 1, tk, 2 * group, 2, d, dtype=dtype, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_gqa_split_masks_window_softcap(rng, monkeypatch, dtype):
    """A per-head additive mask with whole chunks masked, a window, softcap,
    Tq > 1 and a value dim that differs (not a multiple of the P @ V step);
    a row masked everywhere writes zeros."""
    tk = 77
    mask = rng.standard_normal((2, 4, 3, tk)).astype(np.float32)
    mask[0, ..., 20:] = -np.inf
    mask[1, :, :, :40] = -np.inf
    mask[1, 2, 1, :] = -np.inf             # one query row sees no key
    _check_gqa(rng, monkeypatch, 8, 2, 3, tk, 4, 1, 48, dv=40, dtype=dtype, mask=mask, causal=True,
               window=30, softcap=5.0, scale=0.3)
    _check_gqa(rng, monkeypatch, 16, 1, 2, tk, 6, 2, 33, dv=65, dtype=dtype, window=9)   # window, no causal
    everywhere = np.full((1, 1, 1, tk), -np.inf, np.float32)
    out = _check_gqa(rng, monkeypatch, 8, 1, 1, tk, 4, 2, 16, dtype=dtype, mask=everywhere)
    assert not np.any(out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_gqa_split_nan(rng, monkeypatch, dtype):
    """A NaN in one key's K turns its query heads' rows NaN (as torch), the
    other KV head's rows stay finite; a NaN V under a -inf mask stays out."""
    tk = 40
    _force_form(monkeypatch, "gqa", 16, dtype)
    mask = np.zeros((1, 1, 1, tk), np.float32)
    mask[..., 5] = -np.inf
    g = _attention_graph(1, 1, tk, 4, 2, 16, dtype=dtype, mask_shape=mask.shape)
    ins = _attention_inputs(rng, 1, 1, tk, 4, 2, 16, dtype=dtype, mask=mask)
    ins["k"][0, 30, 0, 3] = np.nan
    ins["v"][0, 5, 1, :] = np.nan
    got = rlx.compile(g).run(ins)["o"]
    assert np.isnan(got[0, 0, :2]).all() and np.isfinite(got[0, 0, 2:]).all()
    ins["v"][0, 5, 1, :] = 0.0             # the reference multiplies its p = 0 by V
    want = rlx.run_reference(g, ins)["o"]
    np.testing.assert_allclose(got[0, 0, 2:].astype(np.float64), want[0, 0, 2:].astype(np.float64), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length, window", [(1800, 512), (1800, None), (300, 512), (7, 512)])
def test_attention_gqa_split_gemma_decode(rng, monkeypatch, dtype, length, window):
    """The CPU's own choice for a Gemma 3 270M decode step (4 query heads,
    1 KV head, head dim 256, a 2048-key cache, causal, local layers' window
    of 512) takes the grouped-query kernel at every active length."""
    monkeypatch.setattr(lowering_attention, "gqa_split_keys", _GQA_SPLIT_KEYS)
    tk = 2048
    g = _length_graph(1, 1, tk, 4, 1, 256, dtype, causal=True, window=window, scale=1.0 / 16)
    exe = rlx.compile(g)
    if exe.target.one_thread_groups:
        assert _kernels(exe) == [f"attention_split_gqa_{dtype}", f"attention_merge_{dtype}"]
    ins = _attention_inputs(rng, 1, 1, tk, 4, 1, 256, dtype=dtype)
    ins["k"][:, length:] = np.nan
    ins["v"][:, length:] = np.nan
    ins["length"] = np.array([length], np.int32)
    got = exe.run(ins)["o"]
    want = rlx.run_reference(g, ins)["o"]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tq, tk", [(5, 12), (12, 12), (12, 5)])
def test_attention_causal_tq_ne_tk(rng, tq, tk, dtype):
    """Causal aligns the last query with the last key; with Tq > Tk the first
    Tq - Tk queries see no key at all and give zeros."""
    out = _check_attention(rng, 2, tq, tk, 8, 2, 32, dtype=dtype, causal=True)
    if tq > tk:
        assert not np.any(out[:, : tq - tk])
        assert np.all(np.any(out[:, tq - tk:] != 0, axis=-1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_value_dim_differs(rng, dtype):
    _check_attention(rng, 2, 7, 11, 6, 3, 48, dv=24, dtype=dtype, causal=True)
    _check_attention(rng, 1, 3, 5, 2, 2, 16, dv=37, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_mask_broadcast_1_1_tq_tk(rng, dtype):
    b, tq, tk = 2, 7, 13
    mask = rng.standard_normal((1, 1, tq, tk)) * 2
    mask[0, 0, :, 3] = -np.inf
    _check_attention(rng, b, tq, tk, 4, 2, 32, dtype=dtype, mask=mask)
    _check_attention(rng, b, tq, tk, 4, 2, 32, dtype=dtype, mask=mask, causal=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fill", [-np.inf, -1e4])
def test_attention_padding_mask(rng, dtype, fill):
    """[B, 1, 1, Tk] padding mask: batch row 1 pads its last 4 keys, batch
    row 2 pads every key (its rows are all masked: zeros with -inf)."""
    b, t = 3, 10
    mask = np.zeros((b, 1, 1, t))
    mask[1, ..., -4:] = fill
    mask[2] = fill
    out = _check_attention(rng, b, t, t, 4, 4, 32, dtype=dtype, mask=mask)
    if fill == -np.inf:
        assert not np.any(out[2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_shape", [(13,), (7, 13), (2, 1, 7, 13), (1, 4, 1, 13), (2, 4, 7, 13)])
def test_attention_mask_other_broadcasts(rng, dtype, mask_shape):
    _check_attention(rng, 2, 7, 13, 4, 1, 16, dtype=dtype, mask=rng.standard_normal(mask_shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_scale_softcap_window(rng, dtype):
    _check_attention(rng, 2, 9, 9, 4, 2, 32, dtype=dtype, scale=0.3)
    _check_attention(rng, 2, 9, 9, 4, 2, 32, dtype=dtype, softcap=2.0, scale=1.0)
    _check_attention(rng, 2, 9, 9, 4, 2, 32, dtype=dtype, softcap=50.0, causal=True)
    _check_attention(rng, 2, 9, 9, 4, 2, 32, dtype=dtype, window=3, causal=True)
    _check_attention(rng, 2, 9, 9, 4, 2, 32, dtype=dtype, window=4)   # lower bound only
    _check_attention(rng, 1, 1, 513, 8, 2, 64, dtype=dtype, window=64, causal=True, softcap=30.0)


def test_attention_window_semantics(rng):
    """window=1 with causal: each query sees exactly its own key, so the output is v itself."""
    b, t, h, d = 2, 6, 2, 8
    g = _attention_graph(b, t, t, h, h, d, causal=True, window=1)
    ins = _attention_inputs(rng, b, t, t, h, h, d)
    got = rlx.compile(g).run(ins)["o"]
    np.testing.assert_allclose(got, ins["v"], rtol=1e-6, atol=1e-6)


def test_attention_scale_default_is_normalized():
    g = rlx.Graph()
    q = g.input("q", (1, 2, 4, 80))
    kv = g.input("kv", (1, 3, 2, 80))
    node = g.attention(q, kv, kv)
    assert node.attrs["scale"] == pytest.approx(1 / math.sqrt(80))
    assert node.attrs["causal"] is False and node.attrs["softcap"] is None and node.attrs["window"] is None
    assert node.shape == (1, 2, 4, 80)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq, hkv", [(4, 4), (8, 2)])
def test_attention_strided_qkv_from_packed_without_copy(rng, dtype, hq, hkv):
    b, t, d = 2, 11, 32
    g, q, k, v = _packed_qkv_graph(b, t, hq, hkv, d, dtype)
    g.set_outputs(o=g.attention(q, k, v, causal=True))
    exe, _ = assert_matches_reference(g, {"qkv": _rand(rng, (b, t, (hq + 2 * hkv) * d), dtype)})
    assert _kernels(exe) == [f"attention_{dtype}"]     # no copy thunk


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq, hkv", [(4, 4), (8, 2), (6, 1)])
def test_attention_gqa_split_strided_qkv_from_packed_without_copy(rng, monkeypatch, dtype, hq, hkv):
    """The grouped-query split kernel reads head slices of a packed QKV
    tensor (query heads q_sh apart inside one row) through their strides."""
    b, t, d = 2, 11, 32
    want = _force_form(monkeypatch, "gqa", 4, dtype)
    g, q, k, v = _packed_qkv_graph(b, t, hq, hkv, d, dtype)
    g.set_outputs(o=g.attention(q, k, v, causal=True))
    exe, _ = assert_matches_reference(g, {"qkv": _rand(rng, (b, t, (hq + 2 * hkv) * d), dtype)})
    assert _kernels(exe) == want     # no copy thunk


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["fused", "gqa"])
def test_attention_transposed_bhtd_inputs_without_copy(rng, monkeypatch, dtype, form):
    """[B, H, T, D] tensors transposed to [B, T, H, D] are read through their strides."""
    b, h, t, d = 2, 3, 5, 16
    want = _force_form(monkeypatch, form, 2, dtype)
    g = rlx.Graph()
    q, k, v = (g.transpose(g.input(n, (b, h, t, d), dtype), (0, 2, 1, 3)) for n in "qkv")
    mask = g.narrow(g.input("mask", (1, 1, t, 2 * t), dtype), axis=3, start=1, length=t)   # strided mask
    g.set_outputs(o=g.attention(q, k, v, mask))
    ins = {n: _rand(rng, (b, h, t, d), dtype) for n in "qkv"}
    ins["mask"] = _rand(rng, (1, 1, t, 2 * t), dtype)
    exe, _ = assert_matches_reference(g, ins)
    assert _kernels(exe) == want


def test_attention_strided_feature_axis_falls_back_to_copy(rng):
    """A feature axis that is not contiguous gets one dense copy, then the kernel."""
    b, t, h, d = 1, 4, 2, 8
    g = rlx.Graph()
    q = g.transpose(g.input("q", (b, t, d, h)), (0, 1, 3, 2))
    kv = g.input("kv", (b, t, h, d))
    g.set_outputs(o=g.attention(q, kv, kv))
    exe, _ = assert_matches_reference(g, {"q": _rand(rng, (b, t, d, h), "f32"), "kv": _rand(rng, (b, t, h, d), "f32")})
    assert _kernels(exe) == ["copy_f32_f32", "attention_f32"]


def test_attention_rows_never_nan(rng):
    """Huge scores (softmax must subtract the max) and all-masked rows stay finite."""
    b, t, h, d = 1, 6, 2, 16
    mask = np.zeros((1, 1, t, t), np.float32)
    mask[..., 0, :] = -np.inf
    ins = _attention_inputs(rng, b, t, t, h, h, d, mask=mask)
    ins["q"] *= 100
    g = _attention_graph(b, t, t, h, h, d, mask_shape=mask.shape)
    _, got = assert_matches_reference(g, ins)
    assert np.all(np.isfinite(got["o"])) and not np.any(got["o"][:, 0])


# ---------------------------------------------------------------- hypothesis


@st.composite
def _attention_cases(draw):
    b = draw(st.integers(1, 2))
    tq, tk = draw(st.integers(1, 9)), draw(st.integers(1, 12))
    hkv = draw(st.integers(1, 3))
    hq = hkv * draw(st.integers(1, 3))
    d, dv = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    full = (b, hq, tq, tk)
    mask_shape = None
    if draw(st.booleans()):
        rank = draw(st.integers(1, 4))
        mask_shape = tuple(draw(st.sampled_from([1, n])) for n in full[4 - rank:])
    kw = dict(causal=draw(st.booleans()),
              window=draw(st.one_of(st.none(), st.integers(1, 6))),
              softcap=draw(st.one_of(st.none(), st.floats(0.5, 30.0))),
              scale=draw(st.one_of(st.none(), st.floats(0.01, 2.0))))
    return b, tq, tk, hq, hkv, d, dv, mask_shape, kw, draw(st.sampled_from(DTYPES)), draw(st.integers(0, 2**31))


# ---------------------------------------------------------------- active length (i32 run-time data)


def _length_graph(b, tq, tk, hq, hkv, d, dtype, mask_shape=None, **kw):
    g = rlx.Graph()
    q = g.input("q", (b, tq, hq, d), dtype)
    k = g.input("k", (b, tk, hkv, d), dtype)
    v = g.input("v", (b, tk, hkv, d), dtype)
    mask = None if mask_shape is None else g.input("mask", mask_shape, dtype)
    g.set_outputs(o=g.attention(q, k, v, mask, length=g.input("length", (1,), "i32"), **kw))
    return g


LENGTH_GROUPS = [(4, 4), (8, 2), (6, 1)]   # query heads per KV head: 1, 4 and 6


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq, hkv", LENGTH_GROUPS)
@pytest.mark.parametrize("form, split", [("fused", 0), ("split", 8), ("split", 64), ("split2", 8), ("gqa", 8),
                                         ("gqa", 64)])
@pytest.mark.parametrize("tq, causal", [(1, False), (1, True), (3, True)])
def test_attention_active_length_one_executable_every_length(rng, monkeypatch, dtype, hq, hkv, form, split, tq,
                                                             causal):
    """One compiled graph (fused kernel, split-K in chunks of 8 / 64 keys,
    or the grouped-query split kernel) run at lengths 0, 1, in between, Tk
    and past Tk (clamped) against the reference, then shorter again (the
    one-dispatch split form counts only the splits holding keys, so its
    per-row counts must come back to zero whatever the last length); the
    K/V rows past the length hold NaN, which must not reach the output
    (they are never read), and the query grid is odd."""
    tk, d = 77, 40
    want_kernels = _force_form(monkeypatch, form, split, dtype)
    g = _length_graph(2, tq, tk, hq, hkv, d, dtype, causal=causal, softcap=7.0 if causal else None)
    exe = rlx.compile(g)
    assert _kernels(exe) == want_kernels
    ins = _attention_inputs(rng, 2, tq, tk, hq, hkv, d, dtype=dtype)
    for n in (0, 1, 2, 9, 64, 65, 76, 77, 500, 9, 0, 65, 1):
        active = min(n, tk)
        feed = {name: a.copy() for name, a in ins.items()}
        feed["k"][:, active:] = np.nan
        feed["v"][:, active:] = np.nan
        feed["length"] = np.array([n], np.int32)
        got = exe.run(feed)["o"]
        want = rlx.run_reference(g, feed)["o"]
        tol = TOL[dtype]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), err_msg=f"length {n}", **tol)
        assert np.isfinite(got).all(), n
        if active == 0 or (causal and active < tq):
            assert not np.any(got[:, : tq - active]), n   # queries with no key: zeros
        elif active:   # the same as attention over the first `active` keys, without a length
            short = _attention_graph(2, tq, active, hq, hkv, d, dtype=dtype, causal=causal,
                                     softcap=7.0 if causal else None)
            direct = rlx.run_reference(short, {"q": feed["q"], "k": feed["k"][:, :active],
                                               "v": feed["v"][:, :active]})["o"]
            np.testing.assert_allclose(got.astype(np.float64), direct.astype(np.float64), **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form, split", [("fused", 0), ("split", 5), ("split2", 5), ("gqa", 5), ("gqa", 12)])
def test_attention_active_length_with_a_mask_and_window(rng, monkeypatch, dtype, form, split):
    """A length, an additive mask and a window together: the window counts
    back from the last active key."""
    tk = 33
    _force_form(monkeypatch, form, split, dtype)
    mask = rng.standard_normal((1, 1, 2, tk)).astype(np.float32)
    mask[..., 3] = -np.inf
    g = _length_graph(1, 2, tk, 8, 2, 24, dtype, mask.shape, causal=True, window=6, scale=0.4)
    exe = rlx.compile(g)
    ins = _attention_inputs(rng, 1, 2, tk, 8, 2, 24, dtype=dtype, mask=mask)
    for n in (1, 4, 20, 33):
        ins["length"] = np.array([n], np.int32)
        want = rlx.run_reference(g, ins)["o"]
        np.testing.assert_allclose(exe.run(ins)["o"].astype(np.float64), want.astype(np.float64), **TOL[dtype])


def test_attention_length_ir_errors():
    g = _g()
    q, k = g.input("q", (1, 1, 2, 8)), g.input("k", (1, 5, 2, 8))
    with pytest.raises(ShapeError, match="length must be i32"):
        g.attention(q, k, k, length=g.input("n", (2,), "i32"))
    with pytest.raises(DTypeError):
        g.attention(q, k, k, length=g.input("m", (1,), "f32"))


def _random_mask(rng, mask_shape):
    """Normal values with a fifth of them -inf (masked keys), or None for no mask."""
    if mask_shape is None:
        return None
    mask = rng.standard_normal(mask_shape)
    mask[rng.random(mask_shape) < 0.2] = -np.inf
    return mask


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_attention_cases())
def test_attention_random_shapes(case):
    b, tq, tk, hq, hkv, d, dv, mask_shape, kw, dtype, seed = case
    rng = np.random.default_rng(seed)
    mask = _random_mask(rng, mask_shape)
    _check_attention(rng, b, tq, tk, hq, hkv, d, dv, dtype, mask, **kw)


@pytest.mark.parametrize("check", [_check_split, _check_split2, _check_gqa], ids=["split", "split2", "gqa_split"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_attention_cases(), keys=st.integers(1, 6))
def test_attention_split_forms_random_shapes(check, case, keys):
    """The split-K kernel and the grouped-query split kernel on random shapes."""
    b, tq, tk, hq, hkv, d, dv, mask_shape, kw, dtype, seed = case
    rng = np.random.default_rng(seed)
    mask = _random_mask(rng, mask_shape)
    with pytest.MonkeyPatch.context() as mp:
        check(rng, mp, keys, b, tq, tk, hq, hkv, d, dv, dtype, mask, **kw)


# ---------------------------------------------------------------- IR errors


def _g():
    return rlx.Graph()


def test_attention_ir_errors():
    g = _g()
    q = g.input("q", (2, 5, 8, 16))
    k = g.input("k", (2, 7, 2, 16))
    v = g.input("v", (2, 7, 2, 24))
    with pytest.raises(ShapeError, match=r"q must be 4-D.*\(5, 8, 16\)"):
        g.attention(g.input("q3", (5, 8, 16)), k, v)
    with pytest.raises(ShapeError, match="head dims differ"):
        g.attention(g.input("qd", (2, 5, 8, 32)), k, v)
    with pytest.raises(ShapeError, match="multiple of kv heads"):
        g.attention(g.input("qh", (2, 5, 6, 16)), g.input("k4", (2, 7, 4, 16)), g.input("v4", (2, 7, 4, 16)))
    with pytest.raises(ShapeError, match=r"k and v must share \[Tk, Hkv\]"):
        g.attention(q, k, g.input("v6", (2, 6, 2, 24)))
    with pytest.raises(ShapeError, match="batch sizes differ"):
        g.attention(q, g.input("kb", (3, 7, 2, 16)), g.input("vb", (3, 7, 2, 24)))
    with pytest.raises(ShapeError, match=r"mask shape \(5, 6\) does not broadcast"):
        g.attention(q, k, v, g.input("m", (5, 6)))
    with pytest.raises(ShapeError, match="mask shape"):
        g.attention(q, k, v, g.input("m5", (1, 1, 1, 5, 7)))
    with pytest.raises(DTypeError, match="same dtype"):
        g.attention(q, k, g.input("v16", (2, 7, 2, 24), "f16"))
    with pytest.raises(DTypeError, match="same dtype"):
        g.attention(q, k, v, g.input("m16", (5, 7), "f16"))
    with pytest.raises(DTypeError, match="float"):
        g.attention(q, k, v, g.input("mi", (5, 7), "i32"))
    for bad in (dict(softcap=0.0), dict(softcap=-1.0), dict(window=0), dict(window=2.5), dict(scale="x"),
                dict(causal=1), dict(scale=float("inf"))):
        with pytest.raises(GraphError):
            g.attention(q, k, v, **bad)
    with pytest.raises(GraphError, match="expects 3 inputs"):
        g.op("attention", (q, k))
    with pytest.raises(GraphError, match="unknown attribute"):
        g.op("attention", (q, k, v), dropout=0.1)
    out = g.attention(q, k, v, g.input("ok", (2, 1, 1, 7)), causal=True, window=3, softcap=30)
    assert out.shape == (2, 5, 8, 24)
    assert out.attrs["softcap"] == 30.0 and out.attrs["window"] == 3


def test_graph_with_attention_validates_and_prints():
    g = _g()
    q = g.input("q", (1, 4, 2, 8))
    g.set_outputs(o=g.attention(q, q, q, causal=True), r=g.rope(q, g.input("pos", (4,), "i32")))
    g.validate()
    assert "attention" in str(g) and "rope" in str(g)


# ---------------------------------------------------------------- the CPU's gemm path


@pytest.mark.parametrize("b,tq,tk,hq,hkv,d,mask", [
    (1, 33, 33, 4, 4, 32, None), (2, 40, 64, 8, 2, 64, "padding"), (1, 64, 64, 4, 1, 80, "full"),
    (5, 33, 40, 4, 2, 32, "padding"), (6, 32, 32, 2, 2, 16, "full")])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_cpu_gemm_path_matches_the_reference(rng, monkeypatch, b, tq, tk, hq, hkv, d, mask, dtype):
    """Long sequences on the CPU run as two gemms per (batch, head) around a
    masked softmax; same semantics as the kernel."""
    monkeypatch.setattr(lowering_attention, "GEMM_PATH_MIN_TOKENS", 32)
    monkeypatch.setattr(lowering_attention, "GEMM_PATH_MIN_TOKENS_CPU", 32)
    m = None
    if mask == "padding":
        m = np.zeros((b, 1, 1, tk), np.float32)
        m[-1, ..., tk - 5:] = -np.inf
    elif mask == "full":
        m = rng.standard_normal((b, hq, tq, tk)).astype(np.float32)
    g = _attention_graph(b, tq, tk, hq, hkv, d, None, dtype, None if m is None else m.shape)
    tol = dict(rtol=1e-5, atol=2e-5) if dtype == "f32" else dict(rtol=2e-3, atol=2e-3)
    exe, _ = assert_matches_reference(g, _attention_inputs(rng, b, tq, tk, hq, hkv, d, None, dtype, m), tol=tol)
    kernels = _kernels(exe)
    # One two-level batched gemm each for the scores and the context over the
    # whole (batch, head) grid; grouped-query heads take one pair per batch row.
    calls = 1 if hq == hkv else b
    assert kernels.count(None) == 2 * calls
    if dtype == "f32":
        assert kernels.count("softmax_masked_f32") == 1
    elif ("f16", "f16", "f32") in exe.target.gemm_mixes:
        # f16 Q, K into f32 scores, f16 probabilities, f16 P @ V: nothing widened
        # but the (broadcast) mask.
        assert kernels.count("softmax_masked_f32_f16") == 1
        assert kernels.count("copy_f16_f32") == (0 if m is None else 1)


# ---------------------------------------------------------------- NaN


def _torch_attention(q, k, v, mask, causal, scale):
    qt, kt, vt = (_t(a).permute(0, 2, 1, 3) for a in (q, k, v))
    rep = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(rep, 1), vt.repeat_interleave(rep, 1)
    s = qt @ kt.transpose(-1, -2) * scale
    if mask is not None:
        s = s + _t(mask)
    if causal:
        tq, tk = s.shape[-2:]
        keep = torch.arange(tk)[None, :] <= torch.arange(tq)[:, None] + (tk - tq)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, -1)
    dead = torch.isneginf(s).all(-1, keepdim=True)
    p = torch.where(dead, torch.zeros_like(p), p)      # rlx's rule for rows masked everywhere
    return (p @ vt).permute(0, 2, 1, 3).numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tk", [1, 7, 33])
@pytest.mark.parametrize("path", ["kernel", "gemm", "causal", "split"])
def test_attention_nan_scores(rng, monkeypatch, dtype, tk, path):
    monkeypatch.setattr(lowering_attention, "_use_gemm_path", lambda *a: path == "gemm")
    if path == "split":
        _force_split(monkeypatch, 3)
    b, tq, hq, hkv, d = 2, 5, 4, 2, 16
    nd = _np_dtype(dtype)
    q = rng.standard_normal((b, tq, hq, d)).astype(nd)
    k = rng.standard_normal((b, tk, hkv, d)).astype(nd)
    v = rng.standard_normal((b, tk, hkv, d)).astype(nd)
    mask = np.zeros((b, hq, tq, tk), nd)
    q[0, 1, 2, 3] = np.nan                  # one query row NaN
    k[1, tk - 1, 0, 0] = np.nan             # the last key of batch 1, kv head 0: NaN scores (unless masked)
    mask[0, 0, 3, tk // 2] = np.nan         # NaN from the mask
    mask[1, 3, 2, :] = -np.inf              # a row masked everywhere: zeros
    mask[0, 1, 4, 0] = np.inf               # +inf score: inf - inf, NaN (torch)
    g = rlx.Graph()
    qn, kn, vn = g.input("q", q.shape, dtype), g.input("k", k.shape, dtype), g.input("v", v.shape, dtype)
    mn = g.input("m", mask.shape, dtype)
    causal = path == "causal"
    g.set_outputs(y=g.attention(qn, kn, vn, mn, causal=causal))
    want = _torch_attention(q, k, v, mask, causal, 1 / np.sqrt(d))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "f32" else dict(rtol=5e-3, atol=5e-3)
    got = _check(g, {"q": q, "k": k, "v": v, "m": mask}, want, dtype, tol=tol)
    assert (got[1, 2, 3] == 0).all()
    if not causal or tk >= tq:                # else causal masking hides every key from query 1
        assert np.isnan(got[0, 1, 2]).all()


def test_split_keys_policy():
    """GPUs split few rows (a decode step: one query per head) into chunks of
    SPLIT_KEYS_GPU and leave many rows (prefill) to the fused kernel; the CPU
    splits only rows fewer than its cores."""
    from types import SimpleNamespace

    from rlx.runtime.target import Target, host_target

    h200 = SimpleNamespace(target=Target("cuda", 132, 1024, 32, 1 << 40))
    cpu = SimpleNamespace(target=host_target(2, 1 << 40))
    keys = lowering_attention.SPLIT_KEYS_GPU
    assert _SPLIT_KEYS(h200, 4, 512) == keys
    assert _SPLIT_KEYS(h200, 4, keys) == 0            # one chunk: nothing to split
    assert _SPLIT_KEYS(h200, 264, 512) == 0           # enough rows for every core
    assert _SPLIT_KEYS(cpu, 1, 512) == lowering_attention.SPLIT_KEYS_CPU
    assert _SPLIT_KEYS(cpu, 4, 512) == 0
    assert max(lowering_attention.SPLIT_KEYS_GPU, lowering_attention.SPLIT_KEYS_CPU) <= \
        lowering_attention.SPLIT_KERNEL_MAX_KEYS


def test_gqa_split_keys_policy():
    """The CPU takes the grouped-query split kernel for decode steps with
    query heads sharing a KV head and enough keys, in chunks of at most the
    kernel's 128 keys and enough of them for every core; GPUs only where
    GQA_SPLIT_GPU_KEYS is set, in chunks of that many keys."""
    from types import SimpleNamespace

    from rlx.runtime.target import Target, host_target

    h200 = SimpleNamespace(target=Target("cuda", 132, 1024, 32, 1 << 40))
    cpu = SimpleNamespace(target=host_target(2, 1 << 40))
    assert _GQA_SPLIT_KEYS(h200, 1, 1, 4, 1, 2048) == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lowering_attention, "GQA_SPLIT_GPU_KEYS", 16)
        assert _GQA_SPLIT_KEYS(h200, 1, 1, 4, 1, 2048) == 16
        assert _GQA_SPLIT_KEYS(h200, 1, 1, 4, 1, 16) == 0       # one chunk: nothing to split
        assert _GQA_SPLIT_KEYS(h200, 1, 1, 4, 4, 2048) == 0     # no shared KV head
        mp.setattr(lowering_attention, "GQA_SPLIT_GPU_KEYS", 1000)
        assert _GQA_SPLIT_KEYS(h200, 1, 1, 4, 1, 2048) == lowering_attention.SPLIT_KERNEL_MAX_KEYS
    assert _GQA_SPLIT_KEYS(cpu, 1, 1, 4, 1, 2048) == 128       # Gemma 3 270M: 16 splits
    assert _GQA_SPLIT_KEYS(cpu, 1, 1, 4, 1, 200) == 25         # 8 splits: 4 groups a core
    assert _GQA_SPLIT_KEYS(cpu, 1, 1, 4, 4, 2048) == 0         # no shared KV head
    assert _GQA_SPLIT_KEYS(cpu, 1, 512, 4, 1, 2048) == 0       # prefill
    assert _GQA_SPLIT_KEYS(cpu, 1, 1, 4, 1, 32) == 0           # few keys: the fused kernel
    for tk in (64, 100, 129, 1000, 4097):
        keys = _GQA_SPLIT_KEYS(cpu, 1, 1, 8, 2, tk)
        assert 0 < keys <= lowering_attention.SPLIT_KERNEL_MAX_KEYS and -(-tk // keys) >= 4
