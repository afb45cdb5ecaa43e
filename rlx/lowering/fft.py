"""Lowering of the FFT family (shaders/fft.h) and its params packer.

Each transform of length N along the last axis becomes a chain of passes:
- N a power of two <= SHARED_MAX: one fft_shared dispatch, a group per row
  (the whole row in group memory), or 2^a 3^b 5^c up to mixed_max (GPUs
  MIXED_SHARED_MAX, the CPU SHARED_MAX) in a mixed-radix form (on GPUs
  fft_mixed, that form's own kernel: shared_kernel), where the cost model
  prefers that dispatch to the Stockham passes (chosen_passes, from the
  calibrated rates);
- N = 2^a 3^b 5^c otherwise (large powers of two included): one fft_stage
  dispatch per Stockham pass over global memory, radices 4, 2, 3, 5;
- any other N: Bluestein's chirp-z, a length-L power-of-two transform of
  the chirped input, a pointwise product with the chirp's precomputed
  spectrum, the inverse length-L transform, and the output chirp, folded
  into the first and last pass of each inner transform (L >= 2N - 1).
The first pass reads the op's input as it is (complex, real, or a half
spectrum for irfft, through its strides), the last writes the op's output
(the first N // 2 + 1 bins for rfft, the real parts for irfft, scaled for
the norm); passes between ping-pong through two arena scratch buffers.
rfft of an even N >= 4 whose samples are contiguous transforms the packed
signal z[j] = x[2j] + i x[2j+1] at length N / 2 (read in place as complex)
and rfft_post unpacks the N / 2 + 1 bins: half the work. irfft of an even
N >= 4 is its mirror: irfft_pre makes the length N / 2 spectrum of the
output packed in pairs, whose inverse is stored as complex pairs into the
real output. Odd N and strided rfft samples run a full-length complex
transform; on the CPU, odd N two real rows a transform (_real_pairs).
windowed_rfft_power (fusion's power of a windowed spectrum) writes each
bin's power from the unpacking store where one dispatch covers N / 2
(STORE_RFFT_POWER), else from the full-length transform's general store
(STORE_POWER). Twiddle, chirp and spectrum tables are computed in float64
and rounded to f32 once per compile, as resident constants shared by
every node of that length.

On the CPU (groups of one thread, shaders/fft_cpu.h) fft_shared also
unpacks rfft's bins in its store and builds irfft's half spectrum in its
load (one dispatch where it covers N / 2), and 2^a 3^b 5^c above
SHARED_MAX whose rows are plain complex run as a four-step of two
fft_shared dispatches (_four_step) rather than a Stockham pass per radix,
as do Bluestein's inner transforms.
"""

from __future__ import annotations

import math
import struct
import weakref
from dataclasses import dataclass

import numpy as np

from rlx import env
from rlx.ir.dtype import c64, f32
from rlx.ir.graph import Node
from rlx.lowering.core import ABSORBERS, Lowering, ResidentTensor, Work, lowers, rows_view
from rlx.lowering.elementwise import BINARY_OPS, binary_params
from rlx.runtime import params as P
from rlx.runtime.views import RESIDENT, Storage, View

SHARED_MAX = 4096            # RLX_FFT_SHARED_MAX in shaders/fft.h (two f32 arrays: 32 KB of group memory)
# The GPUs' mixed-radix form (N = 2^a 3^b 5^c, not a power of two; fft_mixed):
# its Stockham passes ping-pong between two halves of group memory of this
# many points (RLX_FFT_MIXED_MAX in shaders/fft.h); the radices ride in one
# 32-bit param, 4 bits each (7 passes at most within 4096: 3^7).
MIXED_SHARED_MAX = SHARED_MAX // 2
REGISTER_MIN_BITS, REGISTER_MAX_BITS = 5, 12   # fft_shared's register form: 32 <= N <= 4096
MIXED_MAX_PASSES = 8
RADICES = (4, 2, 3, 5)       # fft_stage's butterflies; 4 first: fewest passes for powers of two
LOAD_COMPLEX, LOAD_REAL, LOAD_HALF_SPECTRUM = 0, 1, 2
STORE_COMPLEX, STORE_REAL = 0, 1
_INVERSE_OPS = ("ifft", "irfft")

# Tables per compile: (kind, length, ...) -> resident view, so every node of
# one length shares one table.
_TABLES: weakref.WeakKeyDictionary[Lowering, dict[tuple, View]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Pass:
    """One dispatch of a transform of length n: fft_shared's power-of-two
    form (radix 0, span = log2 n) or its mixed-radix form (radix 1, span =
    the radices 4 bits each, first pass lowest, ``count`` of them), or one
    fft_stage pass (radix, span = product of earlier radices)."""

    n: int
    radix: int
    span: int
    inverse: bool
    count: int = 0


def factor(n: int) -> list[int] | None:
    """n as radices of fft_stage (4s, then a 2, 3s, 5s), or None when n has
    another prime factor (Bluestein)."""
    out: list[int] = []
    for r in RADICES:
        while n % r == 0:
            out.append(r)
            n //= r
    return out if n == 1 else None


def mixed_span(radices: list[int]) -> int:
    """The mixed-radix form's FftParams.span: the radix of pass i in bits
    4i to 4i + 3, in the order the passes run (the form takes any)."""
    return sum(r << (4 * i) for i, r in enumerate(radices))


def mixed_radices(n: int, eights: bool) -> list[int] | None:
    """The mixed-radix form's passes for n = 2^a 3^b 5^c (None otherwise):
    factor's with its 3s in pairs as radix 9 (the CPU form, shaders/fft_cpu.h:
    a sweep over the row fewer a pair), or with ``eights`` (the GPUs'
    fft_mixed, whose butterflies take radix 8) the fewest passes for the
    2^a, ceil(a / 3) of radix 8 and 4 as even as they come (2^7 = 8 x 4 x
    4), then the 3s and 5s; each pass fewer is a barrier and a trip through
    group memory fewer."""
    radices = factor(n)
    if radices is None:
        return None
    if not eights:
        threes = radices.count(3)
        return ([r for r in radices if r in (2, 4)] + [9] * (threes // 2) + [3] * (threes % 2)
                + [r for r in radices if r == 5])
    a = (n & -n).bit_length() - 1
    passes = -(-a // 3)
    bits = [a // passes + (1 if i < a % passes else 0) for i in range(passes)]
    return [1 << b for b in bits] + [r for r in radices if r in (3, 5)]


def mixed_max(target) -> int:
    """The longest row fft_shared's mixed-radix form takes on ``target``:
    MIXED_SHARED_MAX on GPUs (two ping-pong halves of group memory), the
    CPU form's SHARED_MAX (shaders/fft_cpu.h: four arrays of SHARED_MAX
    vectors a thread)."""
    return SHARED_MAX if target.one_thread_groups else MIXED_SHARED_MAX


def shared_capacity(target, p: Pass) -> int:
    """The points of group memory a row of fft_shared's form ``p`` takes
    (shared_grid's capacity)."""
    return SHARED_MAX if p.radix == 0 else mixed_max(target)


def shared_kernel(target, p: Pass) -> tuple[str, int]:
    """The kernel of a one-dispatch form ``p`` (radix 0 or 1) on ``target``
    and its capacity (shared_grid's): GPUs run the mixed-radix form in
    fft_mixed (shaders/fft.h: group memory for its two halves alone),
    fft_shared the powers of two, and every form on the CPU (fft_cpu.h)."""
    kernel = "fft_mixed_c64" if p.radix == 1 and not target.one_thread_groups else "fft_shared_c64"
    return kernel, shared_capacity(target, p)


def pass_layout(target, p: Pass) -> int:
    """FftParams.swizzle of fft_shared's form ``p``: the target's slot_layout
    for powers of two; plain for the mixed-radix form, whose halves are
    never swizzled (and whose CPU form runs only with plain slots)."""
    return slot_layout(target) if p.radix == 0 else SLOTS_PLAIN


def transform_passes(n: int, inverse: bool, shared: bool = True, mixed_limit: int = MIXED_SHARED_MAX,
                     eights: bool = True) -> list[Pass]:
    """The passes of one length-n transform whose length fft_stage or
    fft_shared covers: one dispatch where fft_shared or fft_mixed covers n
    (the mixed-radix form up to ``mixed_limit``: the target's mixed_max;
    ``eights``: with radix-8 passes, as GPUs run it) and ``shared``, else a
    Stockham pass per radix."""
    if shared and n & (n - 1) == 0 and n <= SHARED_MAX:
        return [Pass(n, 0, n.bit_length() - 1, inverse)]
    radices = factor(n)
    if radices is None:
        raise ValueError(f"transform_passes: {n} is not 2^a 3^b 5^c")
    mixed = mixed_radices(n, eights)
    if shared and n <= mixed_limit and len(mixed) <= MIXED_MAX_PASSES:
        return [Pass(n, 1, mixed_span(mixed), inverse, len(mixed))]
    passes, span = [], 1
    for r in radices:
        passes.append(Pass(n, r, span, inverse))
        span *= r
    return passes


def target_passes(lw: Lowering, n: int, inverse: bool) -> list[Pass]:
    """transform_passes with the target's mixed_max and radices (the CPU's
    form has no radix-8 pass in its mixed-radix form)."""
    return transform_passes(n, inverse, mixed_limit=mixed_max(lw.target), eights=not lw.target.one_thread_groups)


def chosen_passes(lw: Lowering, n: int, rows: int, inverse: bool) -> list[Pass]:
    """transform_passes, with the cost model choosing between fft_shared's
    one dispatch and the Stockham passes where both cover n (the passes
    spread few long rows over a whole GPU, at a global-memory round trip a
    pass: which wins is the calibration's call)."""
    one = target_passes(lw, n, inverse)
    if n < 2 or len(one) != 1 or one[0].radix not in (0, 1):   # n = 1 has no Stockham pass
        return one
    passes = transform_passes(n, inverse, shared=False)
    (groups, _), _ = shared_grid(lw.target, rows, n, shared_kernel(lw.target, one[0])[1])
    return one if lw.decider.prefer_fft_shared(n, rows, groups[0], len(passes)) else passes


def bluestein_length(n: int) -> int:
    """The power of two L >= 2n - 1 whose circular convolution is n's linear one."""
    return 1 << (2 * n - 2).bit_length()


def twiddles(n: int) -> np.ndarray:
    """exp(-2 pi i m / n) for m < n, as f32 (re, im) pairs, then, for the
    lengths fft_shared's register form takes, its own (register_twiddles):
    [n + extra, 2]. Every other reader takes the first n pairs."""
    w = np.exp(-2j * np.pi * (np.arange(n, dtype=np.float64) / n))
    return np.concatenate([np.stack([w.real, w.imag], axis=-1).astype(np.float32), register_twiddles(n)])


def register_twiddles(n: int) -> np.ndarray:
    """The register form's twiddles (shaders/fft.h
    rlx_fft_register_butterflies), [extra, 2] f32 pairs: for each pass after
    the first, of span S and radix R, W_{S R}^{k r} at r S + k (k < S,
    r < R): a butterfly's twiddles at constant offsets from its first, a
    SIMD group's (consecutive k) adjacent; the pass at span P
    (the points a thread) first, then, in three passes, the one at P^2
    (whose block starts at P R_1 = P^2). Empty for other lengths."""
    threads = register_threads(n)
    if not threads:
        return np.zeros((0, 2), np.float32)
    bits, p = n.bit_length() - 1, n // threads
    per_bits = p.bit_length() - 1
    count = -(-bits // per_bits)                                # passes: 2 or 3
    last = 1 << (bits - per_bits * (count - 1))                 # the last pass's radix
    spans = [(p, last if count == 2 else p)] + ([(p * p, last)] if count == 3 else [])
    blocks = []
    for span, radix in spans:
        kr = np.outer(np.arange(radix, dtype=np.float64), np.arange(span, dtype=np.float64)).ravel()
        w = np.exp(-2j * np.pi * (kr / (span * radix)))
        blocks.append(np.stack([w.real, w.imag], axis=-1).astype(np.float32))
    return np.concatenate(blocks)


def chirp(n: int, inverse: bool) -> np.ndarray:
    """w[j] = exp(s pi i j^2 / n) (s = -1 forward, +1 inverse), j < n, with
    j^2 reduced mod 2n in integers first so the angle stays exact; complex128."""
    j = np.arange(n, dtype=np.int64)
    sq = (j * j) % (2 * n)
    return np.exp((1.0 if inverse else -1.0) * 1j * np.pi * sq / n)


def bluestein_spectrum(n: int, length: int, inverse: bool) -> np.ndarray:
    """FFT_L of the convolution kernel conj(w[|m|]) for |m| < n, wrapped
    circularly, divided by L (the inner inverse transform's 1 / L); complex128."""
    b = np.zeros(length, np.complex128)
    wc = np.conj(chirp(n, inverse))
    b[:n] = wc
    if n > 1:
        b[length - n + 1:] = wc[1:][::-1]
    return np.fft.fft(b) / length


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def _table(lw: Lowering, key: tuple, make) -> View:
    tables = _TABLES.setdefault(lw, {})
    if key not in tables:
        value = np.ascontiguousarray(make())
        name = f"fft_{key[0]}({', '.join(str(k) for k in key[1:])})"
        storage = lw.new_storage(f"constant:{name}", value.nbytes, RESIDENT)
        lw.resident.append(ResidentTensor(storage, value, name))
        tables[key] = View.dense(storage, f32, value.shape)
    return tables[key]


def fft_params(node: Node, p: Pass, rows: int, load: dict, store: dict, group_rows: int = 1,
               swizzle: int = 0, group_block: int = 0) -> bytes:
    """FftParams of shaders/fft.h (offsets, strides in floats)."""
    fields = [p.n, rows, p.radix, p.span, int(p.inverse), load["mode"], load["offset"], load["row"], load["step"],
              load["len"], load.get("herm_n", 0), load.get("avail", 0),
              load.get("pre_mode", int(load.get("pre") is not None)),
              store["mode"], store["offset"], store["row"], store["step"], store["count"],
              store.get("post_mode", int(store.get("post") is not None))]
    blocks = [load.get("rpb", 0), load.get("block", 0), store.get("rpb", 0), store.get("block", 0),
              load.get("pad", 0), load.get("valid", 0), int(load.get("reflect", False)), group_block]
    # One bound a dispatch: the load's (pre_mul 3) or the store's (post_mul 3).
    assert not ("limit" in load and "limit" in store), "fft_params: a load limit and a store limit"
    limit = load.get("limit", store.get("limit", 0))
    return struct.pack("<19If12I", *P.u32_fields(node, fields), float(store.get("scale", 1.0)), group_rows,
                       int(swizzle), *P.u32_fields(node, [p.count, limit]), *P.u32_fields(node, blocks))


SHARED_THREADS = 256   # fft_shared's threads per GPU group (its __launch_bounds__ on CUDA, shaders/fft.h)
CPU_ROWS = 16          # fft_shared's rows per CPU group (RLX_FFT_CPU_ROWS, shaders/fft_cpu.h: one per vector lane)
# fft_shared's fused half-length modes: rfft_post in the store (every
# target; shaders/fft_cpu.h on the CPU, rlx_fft_store_rfft in fft.h on GPUs),
# irfft_pre in the load (the CPU only).
STORE_RFFT, LOAD_IRFFT = 2, 3
# windowed_rfft_power: the unpacked bins' power (fft_shared's and fft_mixed's
# fused store), and the power of each output (the general store helper).
STORE_RFFT_POWER, STORE_POWER = 3, 4
# The CPU's odd-length rfft and irfft, two real rows a transform
# (shaders/fft_cpu.h rlx_fft_pairs; the params' rows are pairs, their
# `limit` the real rows).
LOAD_REAL_PAIRS, LOAD_HALF_PAIRS = 4, 5
STORE_RFFT_PAIRS, STORE_REAL_PAIRS = 5, 6
_WINDOWED_OPS = ("windowed_rfft", "windowed_rfft_power")
_REAL_INPUT_OPS = ("rfft", *_WINDOWED_OPS)
PRE_WINDOW = 2   # FftParams.pre_mul: a real window over the row's floats (windowed_rfft)


def register_threads(n: int) -> int:
    """fft_shared's threads a row in its register form (shaders/fft.h
    rlx_fft_register_per_bits: N / 8 at N = 32, 64 and 512, N / 16 at the
    other powers of two from 32 to 4096), 0 for lengths it does not take."""
    bits = n.bit_length() - 1
    if n & (n - 1) or not REGISTER_MIN_BITS <= bits <= REGISTER_MAX_BITS:
        return 0
    return n >> (3 if bits in (5, 6, 9) else 4)


def shared_grid(target, rows: int, n: int, capacity: int = SHARED_MAX
                ) -> tuple[tuple[tuple[int, int, int], tuple[int, int, int]], int]:
    """(grid, rows per group) of fft_shared. The CPU runs a group on one
    thread, up to CPU_ROWS rows a group (one per vector lane). A GPU group takes as many rows as fill its group memory
    (``capacity`` points), fewer where that would leave fewer than two groups
    per compute unit, with up to SHARED_THREADS threads: each group's
    memory is sized for SHARED_MAX points whatever n is, so a core holds
    the same number of groups at every n and short rows alone would starve
    it of threads (a row of 256 points has 64 butterflies). Powers of two
    from 32 to 4096 get exactly register_threads(n) threads a row, which
    fft_shared checks before it runs its register form."""
    if target.one_thread_groups:   # up to CPU_ROWS rows a group, one per vector lane (shaders/fft_cpu.h)
        group_rows = min(rows, CPU_ROWS)
        return ((-(-rows // group_rows), 1, 1), (1, 1, 1)), group_rows
    group_rows = max(1, min(capacity // n, rows // (2 * max(target.compute_units, 1))))
    per_row = register_threads(n) if capacity == SHARED_MAX else 0
    if per_row and per_row <= min(target.max_threads_per_group, SHARED_THREADS):
        group_rows = min(group_rows, SHARED_THREADS // per_row)
        return ((-(-rows // group_rows), 1, 1), (group_rows * per_row, 1, 1)), group_rows
    width = max(target.simd_width, 1)
    butterflies = group_rows * max(n // 4, 1)
    threads = min(target.max_threads_per_group, SHARED_THREADS, -(-butterflies // width) * width)
    return ((-(-rows // group_rows), 1, 1), (threads, 1, 1)), group_rows


SLOTS_PLAIN, SLOTS_SWIZZLED, SLOTS_PADDED = 0, 1, 2   # FftParams.swizzle (shaders/fft.h rlx_fft_pair_slot)


def slot_layout(target) -> int:
    """fft_shared's group-memory slots: as is on the CPU (one thread a group
    has no bank conflicts to avoid); on GPUs spread over the banks, padded
    on CUDA, XOR-swizzled on Metal (whose 32 KB of group memory leave no
    room for padding at N = 4096)."""
    if target.one_thread_groups:
        return SLOTS_PLAIN
    return SLOTS_PADDED if target.backend == "cuda" else SLOTS_SWIZZLED


def _scale(op: str, norm: str, n: int) -> float:
    """numpy.fft's norm: "backward" scales the inverse by 1/n, "forward" the
    forward transform, "ortho" both by 1/sqrt(n)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    inverse = op in _INVERSE_OPS
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _merged_lead(view: View) -> list[tuple[int, int]]:
    """The view's leading (size, stride) pairs, size-1 dimensions dropped and
    neighbours that step as one dimension merged (P.merge_dims)."""
    shape, (strides,) = P.merge_dims(tuple(view.shape[:-1]), (tuple(view.strides[:-1]),))
    return [(d, st) for d, st in zip(shape, strides) if d != 1]


def _source_rows(lw: Lowering, node: Node) -> tuple[View, dict]:
    """The input as rows of its last axis: the view and its load fields
    (float offset, floats between rows and between elements, and rows in
    blocks where two leading strides do not merge: a [B, frames, n] framing
    view of a padded signal). Any last-axis stride is read in place (a
    real(x) view has 2); leading dimensions that make more than two strides
    are read from a dense copy."""
    view = lw.view(node)
    lead = _merged_lead(view)
    if len(lead) > 2:
        view = lw.dense(node)
        lead = _merged_lead(view)
    per = 2 if view.dtype.is_complex else 1      # floats per element
    fields = {"offset": per * view.offset, "row": per * lead[-1][1] if lead else 0, "step": per * view.strides[-1]}
    if len(lead) == 2:
        fields.update(rpb=lead[1][0], block=per * lead[0][1])
    return view, fields


@dataclass(frozen=True)
class PaddedFrames:
    """rfft's input frames(concat([left, signal, right], last axis), n, hop)
    read in place: the frames of each signal row in a block, the padding
    supplied by the load (FftParams.src_pad / src_valid / src_reflect):
    zeros, or rlx.signal's reflect padding (gathers of the signal's own
    samples at numpy.pad's mirrored indices)."""

    signal: Node
    pad: int        # samples before the signal
    hop: int
    frames: int     # frames per signal
    reflect: bool
    absorbed: tuple[Node, ...]   # the nodes no thunk need compute (the frames, the concat, the reflect gathers)


def _zero_constant(node: Node) -> bool:
    return node.op == "constant" and not np.any(np.asarray(node.attrs["value"]))


def _reflect_parts(cat: Node, consumers: dict[Node, list[Node]]) -> tuple[Node, ...] | None:
    """The nodes of concat([left, x, right]) whose sides are reshape(gather(
    reshape(x, (B * L, 1)), indices)) at exactly numpy.pad(..., "reflect")'s
    indices for one reflection (pad < L; rlx.signal._pad_signal), read by
    the concat alone; None for anything else."""
    x = cat.inputs[1]
    if len(x.shape) != 2:
        return None
    b, length = x.shape
    pad = cat.inputs[0].shape[-1]
    if not 0 < pad < length or cat.inputs[2].shape[-1] != pad:
        return None
    mirrored = np.pad(np.arange(length), pad, mode="reflect")
    rows = np.arange(b)[:, None] * length
    nodes: list[Node] = []
    for part, idx in ((cat.inputs[0], mirrored[:pad]), (cat.inputs[2], mirrored[-pad:])):
        gather = part.inputs[0] if part.op == "reshape" else None
        if (gather is None or gather.op != "gather" or consumers.get(part) != [cat]
                or consumers.get(gather) != [part]):
            return None
        table, indices = gather.inputs
        if (table.op != "reshape" or table.inputs[0] is not x or indices.op != "constant"
                or not np.array_equal(np.asarray(indices.attrs["value"]).reshape(b, pad), rows + idx[None, :])):
            return None
        nodes += [part, gather]
    return tuple(nodes)


def _padded_frames(lw: Lowering, node: Node, consumers: dict[Node, list[Node]], outputs: set[Node]
                   ) -> PaddedFrames | None:
    """The pattern where no thunk need write the padded signal: an rfft (or
    a windowed_rfft whose window rides in fft_shared's load: the product
    pass of its other paths reads no padding) of frames of a concat padded
    with zeros or rlx.signal's reflect gathers, that nothing else reads."""
    if node.op not in _REAL_INPUT_OPS or node.inputs[0].op != "frames":
        return None
    frames = node.inputs[0]
    cat = frames.inputs[0]
    n = frames.attrs["frame_length"]
    if node.op in _WINDOWED_OPS and not (n % 2 == 0 and n >= 4 and _fuses_half(lw, n // 2)):
        return None
    if (cat.op != "concat" or len(cat.inputs) != 3 or cat.attrs["axis"] != len(cat.shape) - 1
            or cat.inputs[1].dtype != f32 or frames in outputs or cat in outputs
            or consumers.get(frames) != [node] or consumers.get(cat) != [frames]):
        return None
    if _zero_constant(cat.inputs[0]) and _zero_constant(cat.inputs[2]):
        reflect, sides = False, ()
    else:
        sides = _reflect_parts(cat, consumers)
        if sides is None or any(side in outputs for side in sides):
            return None
        reflect = True
    return PaddedFrames(cat.inputs[1], cat.inputs[0].shape[-1], frames.attrs["hop"], frames.shape[-2], reflect,
                        (frames, cat, *sides))


_PADDED: weakref.WeakKeyDictionary[Lowering, dict[Node, PaddedFrames]] = weakref.WeakKeyDictionary()


def _absorb_padding(lw: Lowering, order: list[Node]) -> set[Node]:
    """The frames views and concats that PaddedFrames reads through: not
    lowered (no copy writes the padded signal)."""
    if not any(node.op in _REAL_INPUT_OPS for node in order):
        return set()
    consumers, outputs = lw.graph.consumers(), set(lw.graph.outputs.values())
    found = {node: pf for node in order if (pf := _padded_frames(lw, node, consumers, outputs)) is not None}
    _PADDED[lw] = found
    return {x for pf in found.values() for x in pf.absorbed}


ABSORBERS.append(_absorb_padding)


def _padded_rows(lw: Lowering, pf: PaddedFrames) -> tuple[View, dict]:
    """The load fields of PaddedFrames: one block a signal row (its rows
    collapsed into one stride, else a dense copy), a row a frame."""
    signal, row = rows_view(lw, pf.signal)
    length = pf.signal.shape[-1]
    return signal, {"offset": signal.offset, "row": pf.hop, "step": 1, "rpb": pf.frames, "block": row,
                    "pad": pf.pad, "valid": length, "reflect": pf.reflect}


@lowers("fft", "ifft", "rfft", "irfft", *_WINDOWED_OPS, reads={0: "rows"},
        kernels=("fft_shared", "fft_mixed", "fft_stage", "rfft_post", "irfft_pre", "binary"))
def _fft(lw: Lowering, node: Node) -> View:
    op, x_node = node.op, node.inputs[0]
    out = lw.new_value(node)
    rows = int(np.prod(node.shape[:-1], dtype=np.int64))
    n = node.shape[-1] if op not in _REAL_INPUT_OPS else x_node.shape[-1]    # the transform's length
    inverse = op in _INVERSE_OPS
    if rows == 0:
        return out
    padded = _PADDED.get(lw, {}).get(node)
    x, load = _padded_rows(lw, padded) if padded is not None else _source_rows(lw, x_node)
    load.update(len=n, mode=LOAD_REAL if x.dtype == f32 else LOAD_COMPLEX)
    x_step = load["step"]
    window = lw.dense(node.inputs[1]) if op in _WINDOWED_OPS else None
    power = op == "windowed_rfft_power"
    if op == "irfft":
        load.update(mode=LOAD_HALF_SPECTRUM, herm_n=n, avail=x_node.shape[-1])
    count = out.shape[-1]
    real_out = out.dtype != c64
    store: dict = {"mode": STORE_REAL if real_out else STORE_COMPLEX, "offset": (1 if real_out else 2) * out.offset,
                   "row": (1 if real_out else 2) * count, "step": 1 if real_out else 2, "count": count,
                   "scale": _scale(op, node.attrs["norm"], n)}

    if window is not None:
        m = n // 2
        if n % 2 == 0 and n >= 4 and x_step == 1 and _fuses_half(lw, m):
            # The window in fft_shared's load (over the packed pairs, in the pre binding,
            # which the store's unpacking leaves free), the bins unpacked in its store.
            packed = dict(load, mode=LOAD_COMPLEX, step=2, len=m, pre=window, pre_mode=PRE_WINDOW)
            unpacked = dict(store, mode=STORE_RFFT_POWER if power else STORE_RFFT)
            _fused_half(lw, node, rows, m, False, packed, unpacked, x, out, n, pre=window)
            return out
        # Any other length or layout: the product first, then rfft's own path
        # (the power: the full-length transform, whose general store writes it).
        x = _windowed(lw, node, x, load, window, rows, n)
        load = {"offset": 0, "row": n, "step": 1, "len": n, "mode": LOAD_REAL}
        x_step = 1
        if power:
            _transform(lw, node, rows, n, False, load, dict(store, mode=STORE_POWER), x, out)
            return out
    if op in _REAL_INPUT_OPS and n % 2 == 0 and n >= 4 and x_step == 1:
        # Half length: x read as n / 2 complex values, unpacked by rfft_post.
        m = n // 2
        packed = dict(load, mode=LOAD_COMPLEX, step=2, len=m)
        if _fuses_half(lw, m):   # fft_shared's store unpacks the bins
            _fused_half(lw, node, rows, m, False, packed, dict(store, mode=STORE_RFFT), x, out, n)
            return out
        z = View.dense(lw.scratch(node, rows * m * c64.itemsize), f32, (rows * m * 2,))
        plain = {"mode": STORE_COMPLEX, "offset": 0, "row": 2 * m, "step": 2, "count": m}
        _transform(lw, node, rows, m, False, packed, plain, x, z)
        tw = _table(lw, ("twiddles", n), lambda: twiddles(n))
        params = struct.pack("<4If3I", *P.u32_fields(node, [m, rows, store["offset"], store["row"]]),
                             float(store["scale"]), 0, 0, 0)
        lw.dispatch(f"{node!r} (unpack the half-length transform)", "rfft_post_c64", [(z, "r"), (out, "w"), (tw, "r")],
                    params, lw.target.elementwise_grid(rows * (m + 1), scalar=True), Work("unary"))
        return out
    if op == "irfft" and n % 2 == 0 and n >= 4:
        # Half length: the spectrum of x packed in pairs, then its length n / 2 inverse
        # stored as complex pairs straight into the real output (twice the full scale).
        m = n // 2
        packed_store = {"mode": STORE_COMPLEX, "offset": out.offset, "row": n, "step": 2, "count": m,
                        "scale": 2.0 * store["scale"]}
        if _fuses_half(lw, m, inverse=True):   # the CPU builds the half-length spectrum in fft_shared's load
            half = dict(load, mode=LOAD_IRFFT, len=m)
            _fused_half(lw, node, rows, m, True, half, packed_store, x, out, n)
            return out
        z = View.dense(lw.scratch(node, rows * m * c64.itemsize), f32, (rows * m * 2,))
        tw = _table(lw, ("twiddles", n), lambda: twiddles(n))
        if "rpb" in load:   # irfft_pre reads rows of one stride
            x = lw.dense(x_node)
            load = {"offset": 2 * x.offset, "row": 2 * x_node.shape[-1], "step": 2}
        params = struct.pack("<8I", *P.u32_fields(node, [m, rows, load["offset"], load["row"], load["step"],
                                                         x_node.shape[-1], 0, 0]))
        lw.dispatch(f"{node!r} (the half-length spectrum)", "irfft_pre_c64", [(x, "r"), (z, "w"), (tw, "r")],
                    params, lw.target.elementwise_grid(rows * m, scalar=True), Work("unary"))
        packed_load = {"mode": LOAD_COMPLEX, "offset": 0, "row": 2 * m, "step": 2, "len": m}
        _transform(lw, node, rows, m, True, packed_load, packed_store, z, out)
        return out
    if _real_pairs(lw, node, rows, n, inverse, load, store, x, out):
        return out
    _transform(lw, node, rows, n, inverse, load, store, x, out)
    return out


def _real_pairs(lw: Lowering, node: Node, rows: int, n: int, inverse: bool, load: dict, store: dict, src: View,
                dst: View) -> bool:
    """rfft, fft / ifft of real rows and irfft of odd n (no half-length
    form) on the CPU, two real rows a transform (``inverse``: the
    transform's direction): rows 2r and 2r + 1 as the real and imaginary
    parts of one complex row (shaders/fft_cpu.h rlx_fft_pairs separates the
    two spectra in its store, each conjugate-symmetric; irfft's two half
    spectra combine in its load), where one fft_shared dispatch covers n.
    Half the transforms of the full-length form, whose imaginary lanes held
    zeros."""
    cpu_form = lw.target.one_thread_groups and slot_layout(lw.target) == SLOTS_PLAIN
    real_rows = load["mode"] == LOAD_REAL and store["mode"] == STORE_COMPLEX
    half_spectra = load["mode"] == LOAD_HALF_SPECTRUM and store["mode"] == STORE_REAL
    if (not cpu_form or n % 2 == 0 or rows < 2 or not (real_rows or half_spectra) or factor(n) is None
            or any(key in load for key in ("pre", "rpb", "valid")) or store.get("post") is not None):
        return False
    passes = target_passes(lw, n, inverse)
    if len(passes) != 1 or passes[0].radix != 1:
        return False
    (p,) = passes
    pairs = (rows + 1) // 2
    pair_load = dict(load, mode=LOAD_REAL_PAIRS if real_rows else LOAD_HALF_PAIRS, limit=rows)
    pair_store = dict(store, mode=STORE_RFFT_PAIRS if real_rows else STORE_REAL_PAIRS)
    tw = _table(lw, ("twiddles", n), lambda: twiddles(n))
    kernel, capacity = shared_kernel(lw.target, p)
    grid, group_rows = shared_grid(lw.target, pairs, n, capacity)
    params = fft_params(node, p, pairs, pair_load, pair_store, group_rows, swizzle=pass_layout(lw.target, p))
    lw.dispatch(f"{node!r} (real rows in pairs)", kernel, [(src, "r"), (dst, "w"), (tw, "r"), (tw, "r"), (tw, "r")],
                params, grid, fft_work(p, pairs))
    return True


def _windowed(lw: Lowering, node: Node, x: View, load: dict, window: View, rows: int, n: int) -> View:
    """x times the window into scratch, dense [rows, n] (windowed_rfft where
    the window cannot ride in fft_shared's load): the binary kernel over
    x's rows (blocks of rows as two dimensions) and the window broadcast."""
    out = View.dense(lw.scratch(node, rows * n * f32.itemsize), f32, (rows, n))
    if "rpb" in load:
        shape = (rows // load["rpb"], load["rpb"], n)
        x_strides, w_strides = (load["block"], load["row"], load["step"]), (0, 0, 1)
    else:
        shape, x_strides, w_strides = (rows, n), (load["row"], load["step"]), (0, 1)
    params = binary_params(rows * n, BINARY_OPS["mul"], False, load["offset"], window.offset, shape, x_strides,
                           w_strides)
    lw.dispatch(f"{node!r} (the window)", "binary_f32", [(x, "r"), (window, "r"), (out, "w")], params,
                lw.target.elementwise_grid(rows * n, scalar=True), Work("elementwise"))
    return out


def fft_work(p: Pass, rows: int) -> Work:
    """A pass's cost family (rlx/tune): fft_shared counts its flops, an
    fft_stage pass the bytes it streams (its hazard ranges)."""
    if p.radix in (0, 1):
        return Work("fft_shared", 5.0 * p.n * max(1.0, math.log2(max(p.n, 2))) * rows)
    return Work("fft_stage")


def _fuses_half(lw: Lowering, m: int, inverse: bool = False) -> bool:
    """Whether the half-length rfft / irfft of length 2m fuses its unpacking
    into one fft_shared dispatch, when fft_shared alone covers m: rfft's
    unpacking in the store on every target, irfft's spectrum in the load on
    the CPU only (shaders/fft_cpu.h, which fft_shared runs for plain slots
    alone; the GPU form has no LOAD_IRFFT)."""
    cpu_form = lw.target.one_thread_groups and slot_layout(lw.target) == SLOTS_PLAIN
    if (inverse and not cpu_form) or factor(m) is None:
        return False
    passes = target_passes(lw, m, False)
    return len(passes) == 1 and passes[0].radix in (0, 1)


def _fused_half(lw: Lowering, node: Node, rows: int, m: int, inverse: bool, load: dict, store: dict,
                src: View, dst: View, n: int, pre: View | None = None) -> None:
    """One fft_shared dispatch of the length-m transform whose store unpacks
    rfft's bins (STORE_RFFT) or whose load builds irfft's half-length
    spectrum (LOAD_IRFFT); the length-n twiddles ride in the pre and post
    bindings, which those modes read instead of multiplying by them (pre:
    rfft's window instead, bound at its first float)."""
    (p,) = target_passes(lw, m, inverse)
    tw = _table(lw, ("twiddles", m), lambda: twiddles(m))
    half_tw = _table(lw, ("twiddles", n), lambda: twiddles(n))
    kernel, capacity = shared_kernel(lw.target, p)
    grid, group_rows = shared_grid(lw.target, rows, m, capacity)
    layout = pass_layout(lw.target, p)
    params = fft_params(node, p, rows, load, store, group_rows, swizzle=layout)
    pre_binding = (half_tw, "r") if pre is None else (pre, "r@")
    lw.dispatch(f"{node!r} (half length, fused)", kernel,
                [(src, "r"), (dst, "w"), (tw, "r"), pre_binding, (half_tw, "r")], params, grid, fft_work(p, rows))


def _four_step_split(lw: Lowering, n: int, load: dict, store: dict) -> tuple[int, int] | None:
    """(n1, n2), n = n1 n2 with n1 >= n2, when a length above SHARED_MAX runs
    as two fft_shared dispatches (the four-step): powers of two on the CPU,
    and on GPUs unless RLX_FFT_GPU_FOUR_STEP=0 (then a Stockham pass per
    radix; on an H100 the four-step took a third of their time at 65536);
    on the CPU also other 2^a 3^b 5^c as two factors of at most SHARED_MAX
    (_idle_lanes: 6144 = 96 x 64, 10000 = 125 x 80). Complex rows of unit
    step in and out, read and written whole; the powers of two's factors
    are multiples of CPU_ROWS (every group of lanes fills one block of
    columns)."""
    if not (lw.target.one_thread_groups or env.fft_gpu_four_step()):
        return None
    if n <= SHARED_MAX or n > SHARED_MAX * SHARED_MAX:
        return None
    if (load["mode"] != LOAD_COMPLEX or load["step"] != 2 or load.get("pre") is not None or load["len"] != n
            or "rpb" in load
            or store["mode"] != STORE_COMPLEX or store["step"] != 2 or store.get("post") is not None
            or store["count"] != n):
        return None
    if n & (n - 1) == 0:
        n2 = 1 << ((n.bit_length() - 1) // 2)
        return n // n2, n2
    if not lw.target.one_thread_groups or factor(n) is None:   # GPUs: powers of two
        return None
    # Factors that are multiples of CPU_ROWS fill every group of lanes; the
    # others leave each block's last group short (FftParams.group_block). So
    # factors of CPU_ROWS or more where there are (a shorter one runs short
    # transforms in short groups: 4500 = 300 x 15 measured 1.4x the time of
    # 75 x 60), then the fewest lanes idle over both dispatches, then the
    # most balanced pair.
    pairs = [(a < CPU_ROWS, _idle_lanes(n // a) + _idle_lanes(a), n // a - a, n // a, a)
             for a in range(2, SHARED_MAX + 1) if n % a == 0 and a <= n // a <= SHARED_MAX]
    return min(pairs)[3:] if pairs else None


def _idle_lanes(block: int) -> float:
    """The share of CPU lanes (CPU_ROWS a group) a block of ``block`` rows
    leaves idle in its groups: the last group's unused lanes."""
    groups = -(-block // CPU_ROWS)
    return (groups * CPU_ROWS - block) / (groups * CPU_ROWS)


def _four_step(lw: Lowering, node: Node, rows: int, n1: int, n2: int, inverse: bool, load: dict, store: dict,
               src: View, dst: View, y: View | None = None) -> None:
    """A length-n = n1 n2 transform as x[j1 n2 + j2] -> columns: the n2
    length-n1 transforms over j1 (lanes over adjacent j2), each output k1
    times exp(-+2 pi i j2 k1 / n) into Y[k1, j2] -> rows: the n1 length-n2
    transforms of Y's rows (lanes over adjacent k1), output k1 + n1 k2 of
    the row. Both dispatches read and write vectors of adjacent lanes
    (shaders/fft_cpu.h), and each row of lanes is short enough for L2,
    where fft_stage's passes each sweep all rows through memory. The load
    may multiply element j by pre[j] and read zeros from j = limit on
    (pre_mode 3), the store multiply output k by post[k] and keep it only
    below its limit (post_mode 3): Bluestein's chirps (_bluestein_four_step).
    y: the scratch between the two dispatches (a new one by default)."""
    n = n1 * n2
    if y is None:
        y = View.dense(lw.scratch(node, rows * n * c64.itemsize), f32, (rows * n * 2,))
    # Columns of the source's rows (elements load["step"] floats apart: 2
    # for complex values, 1 for real ones; Bluestein's may be either) and
    # of the destination's.
    cols_load = dict(load, row=load["step"], step=load["step"] * n2, len=n1, rpb=n2, block=load["row"])
    cols_store = {"mode": STORE_COMPLEX, "offset": 0, "row": 2, "step": 2 * n2, "count": n1, "rpb": n2,
                  "block": 2 * n, "post_mode": 2}
    rows_load = {"mode": LOAD_COMPLEX, "offset": 0, "row": 2 * n2, "step": 2, "len": n2}
    rows_store = dict(store, row=store["step"], step=store["step"] * n1, count=n2, rpb=n1, block=store["row"])
    grid_table = _table(lw, ("four_step", n1, n2), lambda: _pairs(np.exp(
        -2j * np.pi * np.outer(np.arange(n1), np.arange(n2)) / n)))
    # Each factor in one fft_shared dispatch: a power of two, or (Bluestein's
    # lengths on the CPU) its mixed-radix form.
    (p1,), (p2,) = (target_passes(lw, m, inverse) for m in (n1, n2))
    # Each dispatch's rows come in blocks of adjacent columns: n2 a sequence,
    # then n1.
    steps = [(p1, n2, cols_load, cols_store, src, y), (p2, n1, rows_load, rows_store, y, dst)]
    for i, (p, block, p_load, p_store, a, b) in enumerate(steps):
        prows = rows * block
        tw = _table(lw, ("twiddles", p.n), lambda m=p.n: twiddles(m))
        (kernel, capacity), layout = shared_kernel(lw.target, p), pass_layout(lw.target, p)
        grid, group_rows = shared_grid(lw.target, prows, p.n, capacity)
        group_block = 0
        if lw.target.one_thread_groups and block % group_rows:
            # No group straddles two blocks: a block's last group is short, but
            # every group reads and writes one run of columns.
            group_block = block
            grid = ((rows * -(-block // group_rows), 1, 1), grid[1])
        params = fft_params(node, p, prows, p_load, p_store, group_rows, swizzle=layout, group_block=group_block)
        pre = p_load.get("pre") if i == 0 else None
        post = grid_table if i == 0 else p_store.get("post")
        lw.dispatch(f"{node!r} four-step {i + 1}/2", kernel,
                    [(a, "r"), (b, "w"), (tw, "r"), (pre or tw, "r"), (post or tw, "r")],
                    params, grid, fft_work(p, prows))


def _plain_rows(length: int) -> tuple[dict, dict]:
    """The load and store of dense complex rows of ``length`` values (the
    scratch between a transform's dispatches)."""
    return ({"mode": LOAD_COMPLEX, "offset": 0, "row": 2 * length, "step": 2, "len": length},
            {"mode": STORE_COMPLEX, "offset": 0, "row": 2 * length, "step": 2, "count": length})


def _sequence_rows(load: dict, store: dict, n: int) -> bool:
    """Whether a transform of length n reads its rows' elements by their
    index in the row (complex or real samples or irfft's half spectrum, any
    step, zeros past load["len"]) and writes its first store["count"]
    outputs (complex or the real part, any step), so that the four-step's
    columns can address them by their index in the sequence: not rows in
    blocks, a padded signal, or a pre- or post-multiply of their own."""
    return (load["mode"] in (LOAD_COMPLEX, LOAD_REAL, LOAD_HALF_SPECTRUM) and load.get("pre") is None
            and "rpb" not in load
            and not load.get("valid") and load["len"] <= n
            and store["mode"] in (STORE_COMPLEX, STORE_REAL) and store.get("post") is None
            and "rpb" not in store and store["count"] <= n)


def _smooth_factors(limit: int) -> list[int]:
    """fft_shared's one-dispatch lengths on the CPU up to ``limit`` that its
    four-step takes as a factor: multiples of CPU_ROWS that are 2^a 3^b
    5^c, up to SHARED_MAX (the CPU's mixed_max)."""
    return [m for m in range(CPU_ROWS, min(limit, SHARED_MAX) + 1, CPU_ROWS) if factor(m) is not None]


def _bluestein_split(lw: Lowering, n: int) -> tuple[int, int, int] | None:
    """(L, n1, n2): the length L >= 2n - 1 of Bluestein's convolution as a
    four-step of n1 x n2, or None where the four-step does not take it.
    The power of two above 2n - 1, or on the CPU the least L = n1 n2 of two
    of its factors (_smooth_factors: 9216 = 96 x 96 at n = 4097, where the
    power of two is 16384) when that saves a quarter of the points or
    more; ties go to the most balanced pair."""
    length = bluestein_length(n)
    plain_load, plain_store = _plain_rows(length)
    split = _four_step_split(lw, length, plain_load, plain_store)
    if split is None:
        return None
    if not lw.target.one_thread_groups:   # GPUs: powers of two (their mixed form is untimed as a factor)
        return (length, *split)
    sizes = _smooth_factors(length)
    best = min(((a * b, abs(a - b), a, b) for a in sizes for b in sizes if a * b >= 2 * n - 1), default=None)
    if best is None or 4 * best[0] > 3 * length:
        return (length, *split)
    return best[0], best[2], best[3]


def _bluestein_four_step(lw: Lowering, node: Node, rows: int, n: int, inverse: bool, load: dict, store: dict,
                         src: View, dst: View) -> bool:
    """Bluestein's transform of length n as two four-steps of L
    (_bluestein_split), four fft_shared dispatches where fft_stage would
    take a pass per radix each way: the forward four-step's load
    multiplies by the chirp and reads zeros past the row (pre_mode 3), its
    store multiplies by the convolution's spectrum (post_mode 3); the
    inverse's store multiplies by the chirp and keeps the first outputs
    (post_mode 3). False where the four-step does not take L or the rows
    are not a sequence's (_sequence_rows; then the Stockham passes run)."""
    split = _bluestein_split(lw, n)
    if split is None or not _sequence_rows(load, store, n):
        return False
    length, n1, n2 = split
    plain_load, plain_store = _plain_rows(length)
    w = _table(lw, ("chirp", n, int(inverse)), lambda: _pairs(chirp(n, inverse)))
    spectrum = _table(lw, ("bluestein", n, int(inverse), length),
                      lambda: _pairs(bluestein_spectrum(n, length, inverse)))
    # Two scratch rows of L a row, each the other's input in turn (the
    # memory plan keeps a storage live from its first thunk to its last).
    a, b = (View.dense(lw.scratch(node, rows * length * c64.itemsize), f32, (rows * length * 2,)) for _ in range(2))
    _four_step(lw, node, rows, n1, n2, False, dict(load, pre=w, pre_mode=3, limit=load["len"]),
               dict(plain_store, post=spectrum, post_mode=3, limit=length), src, b, y=a)
    _four_step(lw, node, rows, n1, n2, True, plain_load,
               dict(store, post=w, post_mode=3, limit=store["count"]), b, dst, y=a)
    return True


def _transform(lw: Lowering, node: Node, rows: int, n: int, inverse: bool, load: dict, store: dict,
               src: View, dst: View) -> None:
    """The passes of a length-n transform of every row, from src (as load
    says) to dst (as store says): fft_shared, Stockham passes, or Bluestein."""
    split = _four_step_split(lw, n, load, store)
    if split is not None:
        _four_step(lw, node, rows, *split, inverse, load, store, src, dst)
        return
    # Bluestein for n that fft_stage does not cover, and on the CPU for 2^a 3^b
    # 5^c above SHARED_MAX that no four-step splits (3^15, no two factors
    # within SHARED_MAX): its four dispatches beat a pass per radix, each a
    # sweep of memory.
    smooth_but_long = lw.target.one_thread_groups and n > SHARED_MAX
    if ((factor(n) is None or smooth_but_long)
            and _bluestein_four_step(lw, node, rows, n, inverse, load, store, src, dst)):
        return
    spectrum: View | None = None
    if factor(n) is not None:
        length, chain = n, [chosen_passes(lw, n, rows, inverse)]
    else:
        length = bluestein_length(n)
        w = _table(lw, ("chirp", n, int(inverse)), lambda: _pairs(chirp(n, inverse)))
        spectrum = _table(lw, ("bluestein", n, int(inverse)),
                          lambda: _pairs(bluestein_spectrum(n, length, inverse)))
        load["pre"] = w
        store["post"] = w
        chain = [chosen_passes(lw, length, rows, False), chosen_passes(lw, length, rows, True)]
    tw = _table(lw, ("twiddles", length), lambda: twiddles(length))

    # Ping-pong scratch for the passes between the first and the last (the
    # memory plan keeps a storage live from the first thunk touching it to
    # the last, so two buffers serve the whole chain).
    total = sum(len(c) for c in chain)
    scratch: list[Storage] = [lw.scratch(node, rows * length * c64.itemsize) for _ in range(min(total - 1, 2))]
    plain_load, plain_store = _plain_rows(length)
    src_view, step = src, 0
    for ci, passes in enumerate(chain):
        for pi, p in enumerate(passes):
            first, last = step == 0, step == total - 1
            p_load = load if first else plain_load
            p_store = store if last else dict(plain_store)
            if not last and pi == len(passes) - 1 and ci == 0 and len(chain) > 1:
                p_store["post"] = spectrum       # Bluestein: the convolution's pointwise product
            dst_view = dst if last else View.dense(scratch[step % 2], f32, (rows * length * 2,))
            pre, post = p_load.get("pre") or tw, p_store.get("post") or tw
            if p.radix in (0, 1):
                kernel, capacity = shared_kernel(lw.target, p)
                grid, group_rows = shared_grid(lw.target, rows, p.n, capacity)
            else:
                kernel, group_rows = "fft_stage_c64", 1
                grid = lw.target.elementwise_grid(rows * (p.n // p.radix), scalar=True)
            params = fft_params(node, p, rows, p_load, p_store, group_rows, swizzle=pass_layout(lw.target, p))
            lw.dispatch(f"{node!r} pass {step + 1}/{total}", kernel,
                        [(src_view, "r"), (dst_view, "w"), (tw, "r"), (pre, "r"), (post, "r")],
                        params, grid, fft_work(p, rows))
            src_view, step = dst_view, step + 1


@lowers("real", "imag", reads={0: "strided"})
def _part(lw: Lowering, node: Node) -> View:
    """The f32 parts of c64 storage: strides doubled, imag one float in."""
    v = lw.view(node.inputs[0])
    return View(v.storage, f32, v.shape, tuple(2 * s for s in v.strides), 2 * v.offset + (node.op == "imag"))


@lowers("complex", kernels=("complex_pack",))
def _complex(lw: Lowering, node: Node) -> View:
    re, im = lw.dense(node.inputs[0]), lw.dense(node.inputs[1])
    out = lw.new_value(node)
    n = out.numel
    if n:
        params = struct.pack("<4I", *P.u32_fields(node, [n, re.offset, im.offset, 2 * out.offset]))
        lw.dispatch(repr(node), "complex_pack_c64", [(re, "r"), (im, "r"), (out, "w")], params,
                    lw.target.elementwise_grid(n), Work("elementwise"))
    return out
