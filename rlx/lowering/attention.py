"""Lowering of attention (shaders/attention.h) and its params packer: the
fused kernel, or two batched gemms around a masked softmax for longer
sequences. Q, K, V are read through strides with a contiguous feature axis;
the mask through broadcast strides, never copied. An active-length operand
(i32 run-time data) always takes the kernels, which read it on the device
and touch only the active keys (the gemm path would scan them all)."""

from __future__ import annotations

import struct

import numpy as np

from rlx.ir.dtype import f32, i32
from rlx.ir.graph import Node
from rlx.ir.ops.attention import split_length
from rlx.lowering.core import Lowering, ResidentTensor, Work, feature_contiguous, float_suffix, lowers
from rlx.lowering.softmax import masked_softmax_params
from rlx.runtime import params as P
from rlx.runtime.views import RESIDENT, View

_MAX_THREADS = 256


def attention_params(node: Node, rows: int, tq: int, tk: int, hq: int, group: int, d: int, dv: int,
                     has_mask: bool, causal: bool, window: int, offsets: tuple[int, int, int, int, int],
                     scale: float, softcap: float, q_strides: tuple[int, int, int], k_strides: tuple[int, int, int],
                     v_strides: tuple[int, int, int], m_strides: tuple[int, int, int, int],
                     splits: int = 0, keys_per_split: int = 0, length_offset: int | None = None) -> bytes:
    """AttentionParams: offsets = (q, k, v, mask, out); q/k/v strides =
    (b, t, h) and mask strides = (b, h, q, k), in elements; splits and
    keys_per_split for the split-K kernels (0 for the fused one);
    length_offset: the i32 active length's element offset (None: no length)."""
    q_off, k_off, v_off, m_off, o_off = offsets
    flags = (1 if has_mask else 0) | (2 if causal else 0) | (4 if length_offset is not None else 0)
    head = P.u32_fields(node, [rows, tq, tk, hq, group, d, dv, flags, window, q_off, k_off, v_off, m_off, o_off,
                               splits, keys_per_split])
    tail = P.u32_fields(node, [*q_strides, *k_strides, *v_strides, *m_strides, length_offset or 0, 0, 0])
    return struct.pack("<16I4f16I", *head, scale, softcap, 0.0, 0.0, *tail)


def attention_flops(rows: int, tq: int, tk: int, d: int, dv: int, causal: bool, window: int | None) -> float:
    """Q.K^T and P.V over the keys each query sees, plus a few flops per
    score for scale, mask and softmax: the attention family's work unit."""
    keys = float(tk)
    if causal:          # query i sees tk - tq + i + 1 keys
        keys = tk - tq + (tq + 1) / 2.0
    if window:
        keys = min(keys, float(window))
    return rows * max(keys, 1.0) * (2.0 * d + 2.0 * dv + 5.0)


@lowers("attention", reads={0: "feature", 1: "feature", 2: "feature"},
        kernels=("attention", "attention_split", "attention_split_gqa", "attention_merge", "attention_split_merge",
                 "softmax_masked"))
def _attention(lw: Lowering, node: Node) -> View:
    suffix = float_suffix(node, node.dtype)
    q, k, v = (feature_contiguous(lw, n) for n in node.inputs[:3])
    b, tq, hq, d = q.shape
    tk, hkv = k.shape[1], k.shape[2]
    dv = v.shape[3]
    float_inputs, length_node = split_length(list(node.inputs))
    has_mask = len(float_inputs) == 4
    if has_mask:
        mask = lw.view(node.inputs[3]).broadcast_to((b, hq, tq, tk))
        m_strides = tuple(mask.strides)
    else:
        mask, m_strides = q, (0, 0, 0, 0)   # bound but never read
    length = lw.dense(length_node) if length_node is not None else q   # bound but never read without one
    out = lw.new_value(node)
    rows = b * tq * hq
    if not out.numel:
        return out
    if length_node is None and _use_gemm_path(lw, node, tq, tk):
        if node.dtype == f32:
            return _attention_gemms(lw, node, q, k, v, mask if has_mask else None, out)
        wide_mask = None
        if has_mask:   # the f32 scores take an f32 mask (a copy of B*Tk elements, as broadcast)
            wide_mask = lw.dense(node.inputs[3], dtype=f32).broadcast_to((b, hq, tq, tk))
        if ("f16", "f16", "f32") in lw.target.gemm_mixes:
            # f16 Q @ K^T into f32 scores (their range), softmax to f16
            # probabilities, f16 P @ V straight into the output: no copies.
            return _attention_gemms(lw, node, q, k, v, wide_mask, out)
        # A BLAS with one dtype per gemm: widen the inputs once (a few copies
        # of B*T*H*D elements, cheap next to the T x T work), narrow the result.
        wide = [lw.dense(n, view, f32) for n, view in zip(node.inputs[:3], (q, k, v))]
        wide_out = lw.new_value(node, tuple(out.shape), f32)
        _attention_gemms(lw, node, *wide, wide_mask, wide_out)
        lw.emit_copy(f"{node!r} (narrow to f16)", wide_out, out)
        return out
    attrs = node.attrs
    flops = attention_flops(rows, tq, tk, d, dv, attrs["causal"], attrs["window"])
    gqa_keys = gqa_split_keys(lw, b, tq, hq, hkv, tk)
    keys = gqa_keys or split_keys(lw, rows, tk)

    def params(splits: int = 0) -> bytes:
        return attention_params(
            node, rows, tq, tk, hq, hq // hkv, d, dv, has_mask, attrs["causal"], attrs["window"] or 0,
            (q.offset, k.offset, v.offset, mask.offset, out.offset), float(attrs["scale"]),
            float(attrs["softcap"] or 0.0), tuple(q.strides[:3]), tuple(k.strides[:3]), tuple(v.strides[:3]),
            m_strides, splits, keys if splits else 0, length.offset if length_node is not None else None)

    if keys:
        splits = -(-tk // keys)
        part = lw.new_value(node, (rows * splits * (dv + 2),), f32)
        threads = 1 if lw.target.one_thread_groups else min(lw.target.max_threads_per_group, SPLIT_THREADS)
        # The GQA form's group takes a KV head's query heads: rows / group of them.
        kernel, split_rows = ("attention_split_gqa", rows // (hq // hkv)) if gqa_keys else ("attention_split", rows)
        if not gqa_keys and split_merge(lw):
            merge_threads = 1 if lw.target.one_thread_groups else min(lw.target.max_threads_per_group,
                                                                       SPLIT_MERGE_THREADS)
            lw.dispatch(f"{node!r} ({splits} key splits, the last of a row merges)", f"attention_split_merge_{suffix}",
                        [(q, "r"), (k, "r"), (v, "r"), (mask, "r"), (length, "r"), (part, "w"), (out, "w"),
                         (_split_counts(lw, node, rows), "w")],
                        params(splits), ((rows * splits, 1, 1), (merge_threads, 1, 1)),
                        Work("attention", flops + 3.0 * rows * splits * dv))
            return out
        lw.dispatch(f"{node!r} ({splits} key splits{', query heads together' if gqa_keys else ''})",
                    f"{kernel}_{suffix}", [(q, "r"), (k, "r"), (v, "r"), (mask, "r"), (length, "r"), (part, "w")],
                    params(splits), ((split_rows * splits, 1, 1), (threads, 1, 1)), Work("attention", flops))
        lw.dispatch(f"{node!r} (merge the splits)", f"attention_merge_{suffix}", [(part, "r"), (out, "w")],
                    params(splits), lw.target.row_grid(rows, dv), Work("attention", 3.0 * rows * splits * dv))
        return out
    scores = View.dense(lw.scratch(node, rows * tk * 4), f32, (rows * tk,))
    # Groups of at most 256 threads: more only idle in P @ V, and the kernel's
    # registers cap its pipeline below 1024 threads on CUDA (896 on an H200).
    lw.dispatch(repr(node), f"attention_{suffix}",
                [(q, "r"), (k, "r"), (v, "r"), (mask, "r"), (length, "r"), (scores, "w"), (out, "w")],
                params(), lw.target.row_grid(rows, min(tk, _MAX_THREADS)), Work("attention", flops))
    return out


# attention_split_merge: the split kernel's groups count themselves per row
# in a resident word and the last one merges the row, so split-K is one
# dispatch (a decode step's launch less per attention layer). It needs a
# device-scope fence and atomic; MSL documents a device-scope fence only
# from 3.2, so Metal keeps the merge kernel. The capability switches it off
# for A/B runs (benchmarks/gpu/llm_decode_speed.py's WITHOUT).
SPLIT_MERGE_CAPABILITY = "attention_split_merge"
# A group's threads, the merging group's too: the H200's decode step
# (session 13, one run) took 1.062 / 1.104 ms at positions 128 / 1900 with
# 128, 1.041 / 1.079 with 256, 1.075 / 1.160 with 512, and 1.056-1.060 /
# 1.086-1.088 as two kernels; at 128 the merging group's threads walk two
# features' splits each.
SPLIT_MERGE_THREADS = 256


def split_merge(lw: Lowering) -> bool:
    return SPLIT_MERGE_CAPABILITY in lw.target.capabilities and lw.target.backend != "metal"


def _split_counts(lw: Lowering, node: Node, rows: int) -> View:
    """attention_split_merge's per-row counts: resident words, zero at bind
    time, that every run leaves at zero again (its merging group resets
    them), so a replayed schedule needs no clearing step. One set per node."""
    value = np.zeros(rows, np.int32)
    name = f"split counts of {node!r}"
    storage = lw.new_storage(f"constant:{name}", value.nbytes, RESIDENT)
    lw.resident.append(ResidentTensor(storage, value, name))
    return View.dense(storage, i32, (rows,))


# Split-K for decoding (shaders/attention.h, attention_split / _merge): a
# row's keys in chunks of SPLIT_KEYS_GPU (<= the kernel's RLX_ATT_SPLIT_KEYS,
# 128), one group of SPLIT_THREADS each, when the rows alone would leave
# most GPU cores idle (fewer rows than SPLIT_MAX_ROWS_PER_UNIT per core) and
# a row has more than one chunk of keys. The CPU runs a group per thread and
# its groups already cover its few cores at four rows, so it splits only
# rows that number fewer than its cores, in chunks of SPLIT_KEYS_CPU.
# SPLIT_KEYS_GPU: a group's keys are walked by its few SIMD groups one key
# after another, so short chunks (more groups) win while the merge stays
# cheap: the Gemma 3 270M decode step on the H200 at 128 / 1900 of 2048
# keys took 2.58 / 2.69 ms at 64 keys, 1.95 / 2.07 at 32, 1.64 / 1.79 at
# 16, 1.65 / 1.93 at 8 (benchmarks/README.md, session 7).
SPLIT_KEYS_GPU = 16
SPLIT_KEYS_CPU = 128
SPLIT_THREADS = 128
SPLIT_MAX_ROWS_PER_UNIT = 2
SPLIT_KERNEL_MAX_KEYS = 128   # RLX_ATT_SPLIT_KEYS


def split_keys(lw: Lowering, rows: int, tk: int) -> int:
    """Keys per split of the split-K kernels, or 0 for the fused kernel."""
    target = lw.target
    if target.one_thread_groups:
        keys, few_rows = SPLIT_KEYS_CPU, rows < target.compute_units
    else:
        keys, few_rows = SPLIT_KEYS_GPU, rows < SPLIT_MAX_ROWS_PER_UNIT * target.compute_units
    keys = min(keys, SPLIT_KERNEL_MAX_KEYS)
    return keys if few_rows and tk > keys else 0


# Grouped-query split-K on the CPU (attention_split_gqa + attention_merge):
# in a decode step (at most GQA_SPLIT_MAX_TQ queries) with query heads
# sharing a KV head, one group takes all the query heads of a KV head for a
# chunk of keys, so each K and V row is read once for them, not once per
# head (the fused kernel's group per row). Splits: enough for
# GQA_SPLIT_GROUPS_PER_CORE groups a core (the kernel cuts the keys a query
# sees at run time into that many equal chunks), and at least one per
# SPLIT_KEYS_CPU keys (the kernel's probabilities fit RLX_ATT_SPLIT_KEYS).
# From GQA_SPLIT_MIN_KEYS keys on: below, the fused kernel's one dispatch
# wins over two.
GQA_SPLIT_MAX_TQ = 8
GQA_SPLIT_GROUPS_PER_CORE = 4
GQA_SPLIT_MIN_KEYS = 64
# GPUs keep attention_split (a group per query head and chunk of keys)
# while this is 0; set, it is the keys per split of the grouped-query kernel
# there. Timed on an H200 it is 4-5x slower per call (255 registers, a
# quarter of the groups): the Gemma 3 decode step took 1.63-2.69 ms at 8-64
# keys against 1.11-1.20 (benchmarks/README.md, session 11).
GQA_SPLIT_GPU_KEYS = 0


def gqa_split_keys(lw: Lowering, b: int, tq: int, hq: int, hkv: int, tk: int) -> int:
    """Keys per split of the grouped-query split kernel, or 0 (not taken)."""
    target = lw.target
    if hq == hkv or tq > GQA_SPLIT_MAX_TQ or tk < GQA_SPLIT_MIN_KEYS:
        return 0
    if not target.one_thread_groups:
        keys = min(GQA_SPLIT_GPU_KEYS, SPLIT_KERNEL_MAX_KEYS)
        return keys if keys and tk > keys else 0
    kv_rows = b * tq * hkv
    splits = max(-(-tk // min(SPLIT_KEYS_CPU, SPLIT_KERNEL_MAX_KEYS)),
                 -(-GQA_SPLIT_GROUPS_PER_CORE * target.compute_units // kv_rows))
    return -(-tk // min(splits, tk))


# Sequences of some length run attention as two batched BLAS gemms around
# one masked softmax: the BLAS (CPU BLAS, cuBLAS, MPS) keeps the vector units
# busy where the fused kernel (one query row per group, made for decode)
# re-reads K and V per row. A measured threshold, not yet a cost-model
# decision: from this many queries and keys on (no causal/softcap/window);
# GPUs 32, the CPU 8. The measurements behind both are in benchmarks/README.md
# ("Attention path thresholds").
GEMM_PATH_MIN_TOKENS = 32


GEMM_PATH_MIN_TOKENS_CPU = 8


# At 128 tokens the cuBLAS path beats the fused kernel on the H200 too
# (benchmarks/README.md, "Attention path thresholds"), so GPUs take it as
# well; set False to compare.
GEMM_PATH_ON_GPU = True


def _use_gemm_path(lw: Lowering, node: Node, tq: int, tk: int) -> bool:
    a = node.attrs
    cpu = lw.target.one_thread_groups
    min_tokens = GEMM_PATH_MIN_TOKENS_CPU if cpu else GEMM_PATH_MIN_TOKENS
    return ((cpu or GEMM_PATH_ON_GPU) and not a["causal"] and not a["softcap"] and not a["window"]
            and min(tq, tk) >= min_tokens)


def _attention_gemms(lw: Lowering, node: Node, q: View, k: View, v: View, mask: View | None, out: View) -> View:
    """Batched gemms for the scores (f32, whatever the inputs), one masked
    softmax for all rows (probabilities in the dtype of V), batched gemms for
    the context. Each gemm covers the whole (batch, head) grid in one call:
    heads are the inner batch and batch rows the outer one. Grouped-query
    heads share a KV head, which one stride cannot express across groups, so
    those loop over the batch rows with (KV head, query head in group) as the
    two levels."""
    b, tq, hq, d = q.shape
    tk, hkv, dv = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hkv
    label = repr(node)
    scale = float(node.attrs["scale"])
    scores = View.dense(lw.scratch(node, b * hq * tq * tk * 4), f32, (b, hq, tq, tk))
    probs = scores
    if v.dtype != f32:   # P @ V takes P in V's dtype
        probs = View.dense(lw.scratch(node, b * hq * tq * tk * v.dtype.itemsize), v.dtype,
                           (b, hq, tq, tk))
    qs, ks, vs = q.strides, k.strides, v.strides
    s_entry, o_row = tq * tk, tq * hq * dv
    if group == 1:   # one call: (head, batch row)
        calls = [(0, hq, (qs[2], ks[2], vs[2], s_entry, dv), b, (qs[0], ks[0], vs[0], hq * s_entry, o_row))]
    else:            # per batch row: (query head in group, KV head)
        calls = [(bi, group, (qs[2], 0, 0, s_entry, dv), hkv,
                  (group * qs[2], ks[2], vs[2], group * s_entry, group * dv)) for bi in range(b)]
    for bi, inner, (sq, sk, _, ss, _), outer, (oq, ok, _, os_, _) in calls:
        s0 = View(scores.storage, f32, (tq, tk), (tk, 1), scores.offset + bi * hq * s_entry)
        q0 = View(q.storage, q.dtype, (tq, d), (qs[1], 1), q.offset + bi * qs[0])
        k0 = View(k.storage, k.dtype, (tk, d), (ks[1], 1), k.offset + bi * ks[0])
        lw.gemm(f"{label} scores", q0, k0, s0, tq, tk, d, qs[1], ks[1], tk, True, alpha=scale,
                batch=inner, strides=(sq, sk, ss), outer=outer, outer_strides=(oq, ok, os_))
    # In place when the probabilities stay f32: each thread reads an element before it writes it.
    params = masked_softmax_params(b * hq * tq, tk, 0, mask is not None, 1.0, mask.offset if mask else 0,
                              mask.strides[-1] if mask else 0, (b, hq, tq),
                              tuple(mask.strides[:-1]) if mask else (0, 0, 0))
    kernel = "softmax_masked_f32" if probs is scores else f"softmax_masked_f32_{probs.dtype.name}"
    lw.dispatch(f"{label} softmax", kernel, [(scores, "r"), (mask or scores, "r"), (probs, "w")],
                params, lw.target.row_grid(b * hq * tq, tk, stacked=True), Work("softmax_masked"))
    for bi, inner, (_, _, sv, ss, so), outer, (_, _, ov, os_, oo) in calls:
        p0 = View(probs.storage, probs.dtype, (tq, tk), (tk, 1), probs.offset + bi * hq * s_entry)
        v0 = View(v.storage, v.dtype, (tk, dv), (vs[1], 1), v.offset + bi * vs[0])
        o0 = View(out.storage, out.dtype, (tq, dv), (hq * dv, 1), out.offset + bi * o_row)
        lw.gemm(f"{label} context", p0, v0, o0, tq, dv, tk, tk, vs[1], hq * dv, False,
                batch=inner, strides=(ss, sv, so), outer=outer, outer_strides=(os_, ov, oo))
    return out
