"""The lowering machinery: the Lowering walk over a graph (op -> thunks over
storages and views), the Thunk records it emits, the registry of per-op
lowerings (``lowers``) and the helpers several families share (rows read
with one stride, a feature-contiguous view). Each op family lowers in the
module of its name (rlx/lowering/<family>.py); barrier placement is
rlx/lowering/barriers.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlx.errors import UnsupportedOpError
from rlx.ir.dtype import DType, f32
from rlx.ir.graph import Graph, Node
from rlx.ir.op import get_op
from rlx.runtime import params as P
from rlx.runtime.target import Target
from rlx.runtime.views import ARENA, Storage, View

DISPATCH, GEMM = 0, 1


_FLOAT_SUFFIX = {"f32": "f32", "f16": "f16"}


# Element types as the shim ABI numbers them (rlx_dtype in csrc/rlx_shim.h).
_GEMM_DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "f8e4m3": 3, "f8e5m2": 4}


@dataclass(frozen=True)
class Binding:
    storage: Storage
    offset: int = 0     # bytes past the storage's start


@dataclass(frozen=True)
class Work:
    """What a dispatch costs, as the lowering that emits it declares it; the
    cost model and the calibration read it (rlx/tune/work.py) and never
    decode params. ``family``: the calibrated rate it runs at (a key of
    rlx.tune.work.FAMILY_UNITS); ``flops``: its work where that family
    counts flops (attention, matmul_rows); ``mnk`` / ``transpose_b``: the
    row kernel's shape, which its cost curve is indexed by."""

    family: str
    flops: float = 0.0
    mnk: tuple[int, int, int] | None = None
    transpose_b: bool = False


@dataclass
class Thunk:
    kind: int
    label: str
    kernel: str | None = None
    bindings: list[Binding] = field(default_factory=list)
    params: bytes | None = None
    groups: tuple[int, int, int] = (1, 1, 1)
    threads: tuple[int, int, int] = (1, 1, 1)
    gemm: dict | None = None
    # byte ranges relative to a storage: (storage, start, end)
    reads: list[tuple[Storage, int, int]] = field(default_factory=list)
    writes: list[tuple[Storage, int, int]] = field(default_factory=list)
    barrier: bool = False
    work: Work | None = None     # dispatches: what the cost model charges (None for gemms)
    # Portable source of a user kernel library (rlx.register_kernel); None
    # means the device's built-in kernels.
    source: str | None = None


@dataclass
class ResidentTensor:
    storage: Storage
    value: np.ndarray | None    # constants carry their data; params get it at bind time
    name: str
    state: bool = False         # a state (zeros at bind time, written by runs), not a param


class Lowering:
    """Walks a graph in topological order and emits thunks."""

    def __init__(self, graph: Graph, target: Target, decider, elide_views: bool = True, precision: str = "f32"):
        self.graph = graph
        self.target = target
        # The compile's precision policy (rlx/opt/precision.py): "bf16" also
        # sets the dtype of a quantized linear's dequantized gemm tiles on the
        # host (rlx/lowering/quant.py), which the precision pass cannot (it
        # leaves block-format weights alone).
        self.precision = precision
        # False materializes every view op with a copy (for bisecting).
        self.elide_views = elide_views
        self.copies_avoided = 0
        # Per-shape choices (gemm or row kernel) ask the decider the caller
        # injects (rlx.compile: the device's calibrated cost model,
        # rlx/tune/cost.py), so lowering never reaches up into tuning.
        self.decider = decider
        self.views: dict[Node, View] = {}
        # dense() copies of a node's own value, by (node, dtype, at_start): a
        # value is never written after it is made, so one copy serves every
        # reader (attention widens the same mask once, not once per layer).
        self._dense_copies: dict[tuple[Node, DType, bool], View] = {}
        self.thunks: list[Thunk] = []
        self.storages: list[Storage] = []
        self.resident: list[ResidentTensor] = []
        self.inputs: dict[str, Storage] = {}
        self.params_region = self.new_storage("params", 0)
        self._params_blob = bytearray()
        self._counter = 0

    # ---- storage and views -------------------------------------------------
    def new_storage(self, key: str, nbytes: int, slot: int = ARENA) -> Storage:
        storage = Storage(key, nbytes, slot)
        self.storages.append(storage)
        return storage

    def new_value(self, node: Node, shape: tuple[int, ...] | None = None, dtype: DType | None = None) -> View:
        shape = tuple(node.shape if shape is None else shape)
        dtype = node.dtype if dtype is None else dtype
        self._counter += 1
        nbytes = dtype.nbytes(int(np.prod(shape, dtype=np.int64)), shape[-1] if shape else None)
        return View.dense(self.new_storage(f"v{node.id}.{self._counter}", nbytes), dtype, shape)

    def scratch(self, node: Node, nbytes: int) -> Storage:
        """Arena bytes a kernel needs while it runs (e.g. attention scores).
        Used by one thunk only, so the memory plan gives it a one-step
        lifetime and reuses its bytes right after."""
        self._counter += 1
        return self.new_storage(f"scratch{node.id}.{self._counter}", nbytes)

    def view(self, node: Node) -> View:
        return self.views[node]

    def dense(self, node: Node, view: View | None = None, dtype: DType | None = None,
              at_start: bool = False) -> View:
        """The node's value as a dense view, copying when it is strided (or,
        with at_start, when it does not begin at its storage's first byte:
        kernels whose params carry no element offset for that binding)."""
        own = view is None
        view = self.views[node] if own else view
        if view.is_dense and (dtype is None or dtype == view.dtype) and not (at_start and view.offset):
            return view
        key = (node, dtype or view.dtype, at_start)
        if own and key in self._dense_copies:
            return self._dense_copies[key]
        out = self.new_value(node, view.shape, dtype or view.dtype)
        self.emit_copy(f"copy for {node!r}", view, out)
        if own:
            self._dense_copies[key] = out
        return out

    # ---- emission ----------------------------------------------------------
    def _params_binding(self, params: bytes) -> Binding:
        align = self.target.params_alignment
        pad = (-len(self._params_blob)) % align
        self._params_blob.extend(b"\0" * pad)
        offset = len(self._params_blob)
        self._params_blob.extend(params)
        self.params_region.nbytes = len(self._params_blob)
        return Binding(self.params_region, offset)

    @property
    def params_blob(self) -> bytes:
        return bytes(self._params_blob)

    def dispatch(self, label: str, kernel: str, args: list[tuple[View, str]], params: bytes,
                 grid: tuple[tuple[int, int, int], tuple[int, int, int]], work: Work,
                 source: str | None = None) -> Thunk:
        """args: (view, "r" or "w") in the kernel's binding order, bound at
        their storage's start (kernels take element offsets in their params);
        "r@" / "w@" bind at the view's first byte instead (kernels without
        offsets, e.g. a tile of a quantized weight's rows). The params struct
        is bound after them. work: what it costs (the family's rate, and
        flops where the family counts them). source: a user kernel library's
        source."""
        op = getattr(self, "_lowering_op", None)
        if (source is None and op is not None and kernel_base(kernel) not in KERNELS.get(op, ())
                and kernel_base(kernel) not in _ANY_OP_KERNELS):
            raise UnsupportedOpError(f"{label}: the lowering of {op!r} dispatches {kernel!r}, which it does "
                                     f"not declare (lowers(..., kernels={KERNELS.get(op, ())!r}))")
        thunk = Thunk(DISPATCH, label, kernel=kernel, params=params, groups=grid[0], threads=grid[1],
                      source=source, work=work)
        for view, mode in args:
            thunk.bindings.append(Binding(view.storage, view.byte_offset if mode.endswith("@") else 0))
            start, end = view.byte_range()
            (thunk.writes if mode[0] == "w" else thunk.reads).append((view.storage, start, end))
        thunk.bindings.append(self._params_binding(params))
        self.thunks.append(thunk)
        return thunk

    def emit_copy(self, label: str, src: View, dst: View) -> None:
        """dst = src elementwise through both views' strides (dtype may change)."""
        if src.dtype.is_complex and dst.dtype.is_complex:
            # c64 is (re, im) f32 pairs: the same copy over one more axis of two floats.
            src, dst = (View(v.storage, f32, v.shape + (2,), tuple(2 * s for s in v.strides) + (1,), 2 * v.offset)
                        for v in (src, dst))
        if len(src.shape) > P.MAX_DIMS:
            raise UnsupportedOpError(f"{label}: copies of more than {P.MAX_DIMS} dimensions")
        if not (src.dtype.is_float and dst.dtype.is_float):
            raise UnsupportedOpError(f"{label}: strided copy of {src.dtype.name} is not supported")
        if src.numel == 0:
            return
        kernel = f"copy_{src.dtype.name}_{dst.dtype.name}"
        # Size-1 dimensions dropped and neighbours that step as one merged: the
        # kernel pays an index division per dimension and element on GPUs.
        shape, (src_strides, dst_strides) = P.merge_dims(src.shape, (src.strides, dst.strides))
        params = P.copy(src.numel, src.offset, dst.offset, shape, src_strides, dst_strides)
        self.dispatch(label, kernel, [(src, "r"), (dst, "w")], params,
                      self.target.elementwise_grid(src.numel, scalar=True), Work("copy"))

    def gemm(self, label: str, a: View, b: View, c: View, m: int, n: int, k: int,
             lda: int, ldb: int, ldc: int, trans_b: bool, alpha: float = 1.0,
             batch: int = 1, strides: tuple[int, int, int] = (0, 0, 0),
             outer: int = 1, outer_strides: tuple[int, int, int] = (0, 0, 0), bias: View | None = None,
             a_scale: View | None = None, b_scale: View | None = None, outer_scales: bool = False) -> None:
        """C[m, n] = alpha * A @ op(B) through the shim's BLAS; the views give
        each matrix's storage, first element and element type, ld* its row
        strides; batch repeats it at the given element strides of A, B and C,
        and outer repeats all of that at outer_strides; bias (n elements,
        C's dtype) is added to every row when the target's gemm takes one;
        a_scale / b_scale (one f32 each) multiply FP8 A / B where the
        target's gemm takes FP8; with outer_scales, a_scale holds m f32 (one
        per row of C) and b_scale n (one per column), where the target's
        gemm takes outer-vector scales (gemm_fp8_outer)."""
        def optional(view: View | None) -> Binding | None:   # bias and FP8 scales
            return Binding(view.storage, view.byte_offset) if view is not None else None

        thunk = Thunk(GEMM, label, gemm=dict(
            a=Binding(a.storage, a.byte_offset), b=Binding(b.storage, b.byte_offset),
            c=Binding(c.storage, c.byte_offset), m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=ldc,
            trans_a=0, trans_b=int(trans_b), dtype=_GEMM_DTYPES[a.dtype.name], alpha=float(alpha), beta=0.0,
            batch=batch, stride_a=strides[0], stride_b=strides[1], stride_c=strides[2],
            outer=outer, outer_strides=tuple(outer_strides),
            b_dtype=_GEMM_DTYPES[b.dtype.name], c_dtype=_GEMM_DTYPES[c.dtype.name],
            bias=optional(bias), a_scale=optional(a_scale), b_scale=optional(b_scale),
            scale_mode=int(outer_scales)))
        if bias is not None:
            thunk.reads.append((bias.storage, bias.byte_offset, bias.byte_offset + n * bias.dtype.itemsize))
        for scale, count in ((a_scale, m if outer_scales else 1), (b_scale, n if outer_scales else 1)):
            if scale is not None:
                thunk.reads.append((scale.storage, scale.byte_offset, scale.byte_offset + 4 * count))
        b_rows, b_cols = (n, k) if trans_b else (k, n)
        for view, rows, cols, ld, stride, outer_stride, rw in (
                (a, m, k, lda, strides[0], outer_strides[0], thunk.reads),
                (b, b_rows, b_cols, ldb, strides[1], outer_strides[1], thunk.reads),
                (c, m, n, ldc, strides[2], outer_strides[2], thunk.writes)):
            span = (rows - 1) * ld + cols + (batch - 1) * stride + (outer - 1) * outer_stride
            rw.append((view.storage, view.byte_offset, view.byte_offset + span * view.dtype.itemsize))
        self.thunks.append(thunk)

    # ---- driver --------------------------------------------------------------
    def run(self, order: list[Node]) -> None:
        # Nodes whose value no thunk reads (their readers' lowering takes
        # what they were made from instead; see ABSORBERS): not lowered.
        skipped: set[Node] = set()
        for absorb in ABSORBERS:
            skipped |= absorb(self, order)
        for node in order:
            if node in skipped:
                continue
            fn = LOWERINGS.get(node.op)
            if fn is None:
                raise UnsupportedOpError(
                    f"{node!r}: op '{node.op}' has no lowering on the {self.target.backend} device")
            self._lowering_op = node.op
            view = fn(self, node)
            if get_op(node.op).is_view:
                if self.elide_views or not view.dtype.is_float:
                    self.copies_avoided += 1
                else:
                    out = self.new_value(node, view.shape, view.dtype)
                    self.emit_copy(f"{node!r} (views not elided)", view, out)
                    view = out
            self.views[node] = view


def untouched(thunks: list[Thunk], read: set[int], written: set[int]) -> bool:
    """Whether none of ``thunks`` reads a storage of ``read`` or writes one
    of ``written`` (ids of storages): a thunk can move past them, or they
    past it, with nothing reading or writing in another order."""
    return not any(any(id(s) in read for s, _, _ in t.reads) or any(id(s) in written for s, _, _ in t.writes)
                   for t in thunks)


def float_suffix(node: Node, dtype: DType) -> str:
    if dtype.name not in _FLOAT_SUFFIX:
        raise UnsupportedOpError(f"{node!r}: {node.op} on {dtype.name} is not supported")
    return _FLOAT_SUFFIX[dtype.name]


LOWERINGS: dict[str, Callable[[Lowering, Node], View]] = {}
# Functions (lowering, order) -> nodes that lowering skips because every
# reader of their value reads its inputs instead (the FP8 gemm path reads
# e4m3 codes, not their dequantized copy: rlx/lowering/fp8_gemm.py).
ABSORBERS: list[Callable[[Lowering, list[Node]], set[Node]]] = []


# How each op's lowering reads its inputs, by position, as it declares them
# in ``lowers(..., reads=...)``; a position not named is read "dense" (a
# strided view gets a copy first). Sibling fusion reads this to know which
# views a consumer would copy.
#   "strided": through any strides, broadcasts included (no copy, ever)
#   "feature": through strides when the last axis is contiguous
#   "rows":    as rows with one row stride (rows_readable)
#   "start":   dense and from its storage's first byte (the kernel's params
#              carry no element offset for it: Lowering.dense(at_start=True))
READS_KINDS = ("dense", "strided", "feature", "rows", "start")
READS: dict[str, dict[int, str]] = {}
# The kernels (base names, without dtype suffixes) each op's lowering may
# dispatch, as it declares them; the strided copy that materializes views
# (Lowering.dense, emit_copy) is open to every op. Lowering.dispatch refuses
# an undeclared one, and tests/lowering check that each exists in shaders/.
KERNELS: dict[str, tuple[str, ...]] = {}
_ANY_OP_KERNELS = ("copy",)


def kernel_base(name: str) -> str:
    """A kernel's base name: "softmax_masked_f32_f16" -> "softmax_masked",
    "fft_stage_c64" -> "fft_stage" (the FFT kernels exist in c64 only)."""
    parts = name.split("_")
    while parts and parts[-1] in ("f32", "f16", "c64"):
        parts.pop()
    return "_".join(parts)


def lowers(*ops: str, reads: dict[int, str] | None = None, kernels: tuple[str, ...] = ()):
    """Register ``fn`` as the lowering of ``ops``; ``reads``: how it reads
    each input position that is not plain "dense" (READS_KINDS);
    ``kernels``: the built-in kernels it dispatches (base names)."""
    reads = dict(reads or {})
    bad = {k: v for k, v in reads.items() if v not in READS_KINDS}
    if bad:
        raise ValueError(f"lowers{ops}: unknown read kinds {bad}; expected one of {READS_KINDS}")

    def register(fn):
        for op in ops:
            LOWERINGS[op] = fn
            KERNELS[op] = tuple(kernels)
            if reads:
                READS[op] = reads
        return fn
    return register


def rows_readable(view: View) -> bool:
    """The view reads as rows of its last axis with one row stride: the last
    axis contiguous (or of one element) and the leading dimensions
    collapsing into one."""
    shape, strides = view.shape, view.strides
    if shape and strides[-1] != 1 and shape[-1] != 1:
        return False
    lead = [(d, s) for d, s in zip(shape[:-1], strides[:-1]) if d != 1]
    return all(s0 == s1 * d1 for (_, s0), (d1, s1) in zip(lead, lead[1:]))


def rows_view(lw: Lowering, node: Node) -> tuple[View, int]:
    """The node as rows of its last axis read with one row stride (no copy
    when the leading dimensions collapse and the last axis is contiguous)."""
    view = lw.view(node)
    cols = view.shape[-1] if view.shape else 1
    if not rows_readable(view):
        return lw.dense(node), cols
    lead = [s for d, s in zip(view.shape[:-1], view.strides[:-1]) if d != 1]
    return view, (lead[-1] if lead else cols)


def feature_contiguous(lw: Lowering, node: Node) -> View:
    """The node's view as it is when its last axis is contiguous, else a dense copy."""
    view = lw.view(node)
    if view.shape[-1] > 1 and view.strides[-1] != 1:
        view = lw.dense(node)
    return view
