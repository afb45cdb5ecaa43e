"""Lowering of quantized (GGUF block-format) tensors (shaders/quant.h):
dequantize, the fused decode GEMV that linear/matmul use for few rows, the
dequantize-then-gemm path for many, and gather from a quantized table.

Every block format has the same kernels (``<kernel>_<format>_<f32|f16>``);
the weight is read straight from its blocks. RLX_QUANT_NO_GEMV names formats
whose fused GEMV is off (they dequantize into scratch and take the gemm)."""

from __future__ import annotations

import struct

from rlx import env
from rlx.ir.dtype import QUANTIZED, DType, bf16
from rlx.ir.graph import Node
from rlx.lowering.core import Lowering, Work, float_suffix, lowers
from rlx.lowering.norm import LAST_NORM_CHAIN, NormChain
from rlx.runtime.views import View

FORMATS = (*QUANTIZED, "bf16")
# The fused GEMV serves up to this many rows of x (decode steps, speculative
# and small batched decoding); more rows dequantize once and take the gemm.
GEMV_MAX_ROWS = 8
# Weight rows one CPU group computes (one thread a group there): enough work
# per pool claim that claims cost nothing, few enough that two threads balance.
CPU_GEMV_ROWS_PER_GROUP = 16
# GPU GEMV groups: this many threads, one SIMD group per weight row; the
# kernel's RLX_QGEMV_SIMD_GROUPS (shaders/quant.h) bounds the SIMD groups
# that take rows.
GEMV_THREADS = 256
GEMV_SIMD_GROUPS = 8
# Each SIMD group takes more rows (up to this many) once the weight has rows
# for GEMV_MIN_GROUPS groups without: the group's x staging (shaders/quant.h;
# the integer form's split of x, which groups of >= GEMV1I_MIN_ROWS take)
# is then shared by more rows, and a SIMD group's pipeline runs longer past
# its start. H200 (benchmarks/README.md): 262144 x 640/768, 8 rows a SIMD
# group 119-151 us, 16 107-137, 32 102-133 (session 8); 4096 x 4096 in
# gemv1's f32 form, 8 rows a group (512 groups) 14.2-15.2 us, 16 rows
# 12.1-13.2, 32 rows 14.2-15.4 (session 22); H100, session 37, with the
# direct rows (a SIMD group a weight row): 8 rows 9.7-11.9, 16 rows 8.3-10.4,
# 32 rows 9.7-11.6.
GEMV_MAX_ROWS_PER_SIMD = 32
GEMV_MIN_GROUPS = 256
# m = 1 with k (rounded up to 32) at most this takes gemv1_<fmt>, the decode
# step's kernel (shaders/quant.h RLX_QGEMV1_MAX_K: its x tile); other shapes
# take gemv_<fmt>.
GEMV1_MAX_K = 8192
# CUDA's integer decode GEMV (gemv1i_<fmt>, shaders/quant_pieces.h): the
# formats with int8 codes, for groups of at least this many rows (each
# group splits x into int8 pieces, a pass over x repaid only over many
# rows: weights of >= 16384 rows). H200, session 22: 4096 x 4096 took
# 17-22 us in gemv1i at 8-32 rows a group against 12-15 in gemv1's f32
# form, and the decode step's 1024 x 640 and 640 x 2048 4.4-8.4 us against
# 3.0-4.4 (benchmarks/README.md). H100, session 37, with x split in
# batches: gemv1i 14.5-17.2 us at 16 rows against 7.8-10.3 in gemv1's
# direct rows; 1024 x 640 and 640 x 2048 4.3-7.1 against 2.7-3.4.
GEMV1I_FORMATS = frozenset({"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"})
GEMV1I_MIN_ROWS = 64
# ... and k (rounded up to 32) at most this: x's int8 pieces share gemv1i's
# shared memory with its weight slots (RLX_QGEMV1I_PIECES_BYTES, 16 KiB:
# three pieces of 4096 elements); longer rows take gemv1's f32 form.
GEMV1I_MAX_K = 4096
# Every kernel quantized_linear may dispatch (the lowerings that call it declare them).
LINEAR_KERNELS = (*(f"{kernel}_{fmt}" for kernel in ("gemv", "gemv1", "gemv1n", "dequantize") for fmt in FORMATS),
                  *(f"{kernel}_{fmt}" for kernel in ("gemv1i",) for fmt in sorted(GEMV1I_FORMATS)),
                  *(f"dequantize_{fmt}_bf16" for fmt in QUANTIZED))   # the host's bf16 tiles (tile_dtype)
# Many rows: the weight is dequantized a tile of rows at a time into scratch
# of at most this many bytes, and each tile's gemm writes its columns of C,
# so a vocabulary-sized projection never holds a whole float copy.
DEQUANT_TILE_BYTES = 32 << 20


def quant_params(n: int) -> bytes:
    return struct.pack("<4I", n, 0, 0, 0)


def gemv_params(m: int, n: int, k: int, x_stride: int, y_stride: int, rows_per_group: int, has_bias: bool,
                act: int, glu: int = 0, gate_offset: int = 0, up_offset: int = 0,
                norm: NormChain | None = None) -> bytes:
    """QuantGemvParams (shaders/quant.h); glu: 0, or the activation code of
    the glu that gemv1 forms from x's gate and up halves (at those element
    offsets of x's binding) as it stages x; norm: the rmsnorm_add chain
    that gemv1n forms x by."""
    head = struct.pack("<12I", m, n, k, x_stride, y_stride, rows_per_group, int(has_bias), act, glu, gate_offset,
                       up_offset, 0 if norm is None else 2 if norm.then_norm else 1)
    if norm is None:
        return head + bytes(32)
    return head + struct.pack("<2I2f4I", norm.o.offset, norm.x.offset, norm.eps, norm.next_eps, int(norm.add_one),
                              int(norm.next_add_one), 0, 0)


def is_block_weight(dtype: DType, x_dtype: DType, target) -> bool:
    """Whether linear/matmul must read this weight through shaders/quant.h:
    every block format, and bf16 but against f32 x on the host (the one
    combination a shim's gemm takes: csrc/host_bf16.h)."""
    return dtype.quantized or (dtype.name == "bf16" and (target.backend != "host" or x_dtype.name != "f32"))


def _fmt(dtype: DType) -> str:
    return dtype.name


def gemv_grid(lw: Lowering, n: int, k: int) -> tuple[int, tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """(rows per group, grid): on GPUs one SIMD group per weight row, its
    lanes splitting the row's 32-element chunks, and GEMV_THREADS threads a
    group (capped by the target), so rows_per_group = threads / SIMD width
    (8 on CUDA's 32-wide warps; at most GEMV_SIMD_GROUPS, the SIMD groups
    the kernel gives a shared tile); the CPU gives each group
    CPU_GEMV_ROWS_PER_GROUP rows. The kernel is correct for any thread
    count (a pipeline limit may lower it at run time): fewer SIMD groups
    than rows take the rows in turn."""
    if lw.target.one_thread_groups:
        rows = CPU_GEMV_ROWS_PER_GROUP
        return rows, ((-(-n // rows), 1, 1), (1, 1, 1))
    width = max(lw.target.simd_width, 1)
    threads = max(1, min(lw.target.max_threads_per_group, GEMV_THREADS))
    simd_groups = max(1, min(GEMV_SIMD_GROUPS, threads // width))
    threads = min(threads, simd_groups * width)
    rows = simd_groups * max(1, min(GEMV_MAX_ROWS_PER_SIMD, n // (simd_groups * GEMV_MIN_GROUPS)))
    return rows, ((-(-n // rows), 1, 1), (threads, 1, 1))


def dequantize_into(lw: Lowering, node: Node, w: View, dtype: DType) -> View:
    """The float values of w (a block-format view) in a fresh value of ``dtype``."""
    out = lw.new_value(node, tuple(w.shape), dtype)
    n = out.numel
    if n:
        lw.dispatch(f"{node!r} dequantize", f"dequantize_{_fmt(w.dtype)}_{float_suffix(node, dtype)}",
                    [(w, "r"), (out, "w")], quant_params(n), lw.target.elementwise_grid(n),
                    Work("dequantize"))
    return out


def quantized_linear(lw: Lowering, node: Node, x: View, w: View, bias: View | None, act: int
                     ) -> tuple[View, bool]:
    """x @ w^T for a block-format w [N, K]: the fused GEMV for up to
    GEMV_MAX_ROWS rows of x (which adds the bias and activation itself), else
    w dequantized a tile of rows at a time and the gemm. Returns the output
    and whether the bias and activation are still to apply (the caller's
    epilogue)."""
    suffix = float_suffix(node, x.dtype)
    k = x.shape[-1]
    n = node.shape[-1]
    m = x.numel // max(k, 1)
    out = lw.new_value(node)
    if out.numel == 0:
        return out, False
    fmt = _fmt(w.dtype)
    if (m <= GEMV_MAX_ROWS and fmt not in env.quant_no_gemv()
            and lw.decider.prefer_quant_gemv(m, n, k, w.dtype, x.dtype.name, epilogue=bias is not None or act != 0)):
        if x.offset:   # the GEMV's params carry no offset for x: it reads from the binding's start
            x = lw.dense(node.inputs[0], at_start=True)
        rows, grid = gemv_grid(lw, n, k)
        kernel = _gemv_kernel(lw, fmt, m, k, rows)
        if kernel == "gemv1" and norm_gemv(lw, node, x, w, out, bias, act, rows, grid):
            return out, False
        lw.dispatch(repr(node), f"{kernel}_{fmt}_{suffix}", [(x, "r"), (w, "r"), (out, "w"), (bias or out, "r")],
                    gemv_params(m, n, k, k, n, rows, bias is not None, act), grid,
                    Work("quant_gemv" if m == 1 else "quant_gemv_m8"))   # bound by streaming the blocks
        return out, False
    wide_dtype = tile_dtype(lw, x.dtype)
    item = wide_dtype.itemsize
    tile = max(1, min(n, DEQUANT_TILE_BYTES // max(k * item, 1)))
    scratch = lw.new_value(node, (tile, k), wide_dtype)
    for r0 in range(0, n, tile):
        rows = min(tile, n - r0)
        part = w.narrow(0, r0, rows) if rows < n else w
        wide = View.dense(scratch.storage, wide_dtype, (rows, k))
        lw.dispatch(f"{node!r} dequantize rows {r0}:{r0 + rows}", f"dequantize_{fmt}_{wide_dtype.name}",
                    [(part, "r@"), (wide, "w")], quant_params(rows * k), lw.target.elementwise_grid(rows * k),
                    Work("dequantize"))
        c = out if r0 == 0 else View(out.storage, out.dtype, (m, rows), (n, 1), r0)
        lw.gemm(f"{node!r} rows {r0}:{r0 + rows}", x, wide, c, m, rows, k, k, k, n, True)
    return out, True


def tile_dtype(lw: Lowering, x_dtype: DType) -> DType:
    """The dtype a quantized linear's weight is dequantized to for the gemm:
    x's, except on the host under precision="bf16" with f32 x, where the
    tiles are bf16 (half the bytes; the shim's gemm then rounds x to bf16
    and multiplies with vdpbf16ps where the CPU has AVX-512 BF16:
    csrc/host_bf16.h). The prefill of an LLM takes it by choice
    (rlx.models.llm, prefill_precision); precision="bf16" is host-only."""
    if lw.precision == "bf16" and lw.target.backend == "host" and x_dtype.name == "f32":
        return bf16
    return x_dtype


def _gemv_kernel(lw: Lowering, fmt: str, m: int, k: int, rows: int) -> str:
    """The GEMV kernel's base name for m rows of x and groups of ``rows``
    weight rows: gemv1 (m = 1, x fits its tile), on CUDA its integer form
    gemv1i (many rows a group), or gemv."""
    kp = -(-k // 32) * 32   # k in whole 32-element chunks, as the kernels' x tiles hold it
    if m != 1 or kp > GEMV1_MAX_K:
        return "gemv"
    if lw.target.backend == "cuda" and fmt in GEMV1I_FORMATS and rows >= GEMV1I_MIN_ROWS and kp <= GEMV1I_MAX_K:
        return "gemv1i"
    return "gemv1"


def glu_gemv(lw: Lowering, node: Node, gate: View, up: View, w: View, act: int) -> View | None:
    """glu(gate, up) @ w^T in gemv1 alone, the glu formed as x is staged
    (GPUs: one row of x, k in whole chunks, gate and up in one storage, and
    the f32 form, which stages x as floats); None where that does not apply
    (the caller then runs the glu kernel and linear's path)."""
    k, n = w.shape[1], w.shape[0]
    m = gate.numel // max(k, 1)
    fmt = _fmt(w.dtype)
    if (lw.target.one_thread_groups or not is_block_weight(w.dtype, gate.dtype, lw.target) or m != 1 or k % 32
            or gate.storage is not up.storage or fmt in env.quant_no_gemv()
            or not lw.decider.prefer_quant_gemv(1, n, k, w.dtype, gate.dtype.name, epilogue=False)):
        return None
    rows, grid = gemv_grid(lw, n, k)
    kernel = _gemv_kernel(lw, fmt, 1, k, rows)
    if kernel != "gemv1":
        return None
    out = lw.new_value(node)
    lw.dispatch(repr(node), f"{kernel}_{fmt}_{float_suffix(node, gate.dtype)}",
                [(gate, "r"), (w, "r"), (out, "w"), (out, "r")],
                gemv_params(1, n, k, k, n, rows, False, 0, act, gate.offset, up.offset), grid, Work("quant_gemv"))
    return out


# gemv1n's k at most (shaders/quant_gemv.h RLX_QGEMV1N_MAX_K): the x tile's
# last two chunk rows hold Metal's reduction scratch.
GEMV1N_MAX_K = GEMV1_MAX_K - 64
# Whether norm_gemv applies on targets of one-thread groups (the CPU), where
# each group would form the norm chain again: off, but the tests turn it on
# to check gemv1n's values there.
NORM_GEMV_ON_ONE_THREAD_GROUPS = False


def norm_gemv(lw: Lowering, node: Node, x: View, w: View, out: View, bias: View | None, act: int, rows: int,
              grid: tuple) -> bool:
    """x @ w^T by gemv1n, which forms x from the rmsnorm_add(_rmsnorm)
    dispatch just before it (x: that dispatch's output, read from its
    start: the sums, or the normed sums) as it stages x, group 0 writing
    the chain's output for its other readers; the norm's dispatch and its
    launch are gone. Only right after that dispatch (nothing between them
    to order against), one row, k whole chunks, on GPUs. Returns whether
    it dispatched."""
    chain = LAST_NORM_CHAIN.pop(lw, None)
    k, n = x.shape[-1], w.shape[0]
    if (chain is None or "norm_gemv" not in lw.target.capabilities
            or (lw.target.one_thread_groups and not NORM_GEMV_ON_ONE_THREAD_GROUPS)
            or not lw.thunks or lw.thunks[-1] is not chain.thunk or x.storage is not chain.out.storage
            or x.offset != 0 or x.numel != chain.cols or k != chain.cols or k % 32 or k > GEMV1N_MAX_K
            or x.dtype != chain.out.dtype):
        return False
    lw.thunks.pop()   # its work moves into the GEMV: nothing since reads or writes what it touches
    fmt = _fmt(w.dtype)
    lw.dispatch(f"{chain.thunk.label} + {node!r}", f"gemv1n_{fmt}_{float_suffix(node, x.dtype)}",
                [(chain.o, "r"), (w, "r"), (out, "w"), (bias or out, "r"), (chain.x, "r"), (chain.weight, "r"),
                 (chain.next_weight, "r"), (chain.out, "w")],
                gemv_params(1, n, k, k, n, rows, bias is not None, act, norm=chain), grid, Work("quant_gemv"))
    return True


@lowers("dequantize", kernels=tuple(f"dequantize_{f}" for f in FORMATS))
def _dequantize(lw: Lowering, node: Node) -> View:
    w = lw.dense(node.inputs[0], at_start=True)
    return dequantize_into(lw, node, w, node.dtype)
