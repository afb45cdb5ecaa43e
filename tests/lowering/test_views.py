"""Views: the no-copy reshape of strided views agrees with numpy on random
narrow/transpose chains (property test), and says "copy" only when needed
for the cases numpy itself can view."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx.ir.dtype import f32
from rlx.runtime.views import Storage, View


def _materialize(base: np.ndarray, v: View) -> np.ndarray:
    idx = np.full(v.shape, v.offset, dtype=np.int64)
    for ax, (d, s) in enumerate(zip(v.shape, v.strides)):
        shape = [1] * len(v.shape)
        shape[ax] = d
        idx = idx + np.arange(d).reshape(shape) * s
    return base[idx]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_strided_reshape_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    base = np.arange(4 * 6 * 8 * 10, dtype=np.float32)
    v = View.dense(Storage("s", base.nbytes), f32, (4, 6, 8, 10))
    arr = base.reshape(4, 6, 8, 10)
    for _ in range(int(rng.integers(0, 3))):
        if rng.random() < 0.5:
            ax = int(rng.integers(0, len(v.shape)))
            if v.shape[ax] > 1:
                a = int(rng.integers(0, v.shape[ax] - 1))
                n = int(rng.integers(1, v.shape[ax] - a + 1))
                v = v.narrow(ax, a, n)
                index = [slice(None)] * arr.ndim
                index[ax] = slice(a, a + n)
                arr = arr[tuple(index)]
        else:
            perm = tuple(int(p) for p in rng.permutation(len(v.shape)))
            v, arr = v.transpose(perm), arr.transpose(perm)
    dims, rest = [], arr.size
    for f in (2, 3, 4, 5):
        while rest % f == 0 and rng.random() < 0.5:
            dims.append(f)
            rest //= f
    dims.append(rest)
    dims = tuple(int(d) for d in rng.permutation(dims))
    r = v.reshape(dims)
    if r is not None:
        np.testing.assert_array_equal(_materialize(base, r), arr.reshape(dims))
    else:   # rlx copies only where numpy cannot make a view either
        assert not np.shares_memory(arr.reshape(dims), base)


def test_narrow_of_packed_qkv_splits_into_heads_without_copy():
    v = View.dense(Storage("qkv", 0), f32, (2, 9, 3 * 4 * 8))      # [B, T, 3*H*D]
    k = v.narrow(2, 32, 32).reshape((2, 9, 4, 8))                  # K as [B, T, H, D]
    assert k is not None and k.strides == (9 * 96, 96, 8, 1) and k.offset == 32


def test_lowerings_declare_how_they_read_their_inputs():
    """One table (rlx/lowering/core.py READS, filled by lowers(reads=...)):
    what sibling fusion reads to know which views a consumer copies."""
    from rlx.lowering.core import READS, READS_KINDS, lowers

    assert READS["add"] == {0: "strided", 1: "strided"}
    assert READS["linear"] == {1: "start", 2: "start"}
    assert READS["glu"] == {0: "rows", 1: "rows"}
    assert READS["attention"] == {0: "feature", 1: "feature", 2: "feature"}
    assert all(kind in READS_KINDS for reads in READS.values() for kind in reads.values())
    with pytest.raises(ValueError, match="unknown read kinds"):
        lowers("test_bad_reads", reads={0: "sometimes"})


def test_every_declared_kernel_exists_and_undeclared_ones_are_refused():
    """lowers(..., kernels=...) is the list of kernels an op's lowering may
    dispatch: each exists among the built-in kernels (f32 form, c64 for
    the FFT family), and dispatching one it did not declare is refused at
    compile time."""
    import rlx
    from rlx.lowering import core
    from rlx.lowering.core import KERNELS, Work, lowers
    from rlx.runtime import shim

    lib = shim.open_device("host", 0).builtin_library()
    declared = {k for names in KERNELS.values() for k in names}
    assert {"binary", "unary", "layernorm", "attention", "softmax_masked", "matmul_rows"} <= declared
    from rlx.runtime.shader_source import instantiations, kernel_source

    # The FFT family's kernels exist in c64 only (shaders/fft.h): those bases have no f32 form.
    c64_only = {host[:-4] for host, _ in instantiations(kernel_source("cpu")) if host.endswith("_c64")}
    assert {"fft_shared", "fft_stage", "rfft_post", "complex_pack"} <= c64_only
    # Kernels with no float form (the sort family's u32 passes, the splat family's record kernels, the
    # host's bf16 dequantize tiles) are declared by their whole host name.
    hosts = {host for host, _ in instantiations(kernel_source("cpu"), host_only=True)}
    for base in declared:                    # raises if shaders/ has no such kernel
        lib.pipeline(base if base in hosts else f"{base}_c64" if base in c64_only else f"{base}_f32")

    @lowers("test_sneaky_exp", kernels=("unary",))
    def _sneaky(lw, node):
        out = lw.new_value(node)
        lw.dispatch(repr(node), "softmax_f32", [(lw.view(node.inputs[0]), "r"), (out, "w")], b"\0" * 16,
                    lw.target.row_grid(1, 4), Work("softmax"))
        return out

    from rlx.ir.op import OpDef, TensorType, register_op
    register_op(OpDef("test_sneaky_exp", 1, lambda ts, a: TensorType(ts[0].shape, ts[0].dtype)), replace=True)
    g = rlx.Graph()
    g.set_outputs(y=g.op("test_sneaky_exp", (g.input("x", (4,)),)))
    with pytest.raises(rlx.UnsupportedOpError, match="does not declare"):
        rlx.compile(g)
    core.LOWERINGS.pop("test_sneaky_exp")
