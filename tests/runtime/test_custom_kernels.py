"""rlx.register_kernel: a user op from portable kernel source, compiled for
the device that runs it (here the CPU, at run time, with the disk cache)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import rlx

SCALED_ADD = """
struct ScaledAddParams { uint n; float alpha; };

template <typename T>
RLX_KERNEL scaled_add(RLX_BUF(RLX_DEVICE const T *, a, 0), RLX_BUF(RLX_DEVICE const T *, b, 1),
                      RLX_BUF(RLX_DEVICE T *, out, 2), RLX_PARAMS(ScaledAddParams, p, 3) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) {
        out[i] = rlx_from_float<T>(rlx_to_float(a[i]) * p->alpha + rlx_to_float(b[i]));
    }
}
RLX_INSTANTIATE(scaled_add, float, scaled_add_f32)
RLX_INSTANTIATE(scaled_add, half, scaled_add_f16)
"""


def _register(name="scaled_add"):
    return rlx.register_kernel(
        name, SCALED_ADD.replace("scaled_add", name) if name != "scaled_add" else SCALED_ADD,
        reference=lambda xs, attrs, out: xs[0].astype(np.float32) * np.float32(attrs["alpha"]) + xs[1],
        params=lambda node: struct.pack("<If", int(np.prod(node.shape)), float(node.attrs["alpha"])),
        arity=2, replace=True)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("n", [1, 17, 4097])
def test_registered_kernel_runs_and_matches_its_reference(rng, dtype, n):
    _register()
    g = rlx.Graph()
    a, b = g.input("a", (n,), dtype), g.input("b", (n,), dtype)
    g.set_outputs(y=g.op("scaled_add", [a, b], alpha=0.5))
    np_dt = np.float16 if dtype == "f16" else np.float32
    feed = {"a": rng.standard_normal(n).astype(np_dt), "b": rng.standard_normal(n).astype(np_dt)}
    out = rlx.compile(g).run(feed)["y"]
    ref = rlx.run_reference(g, feed)["y"]
    tol = 2e-3 if dtype == "f16" else 1e-6
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


def test_custom_op_mixes_with_builtin_ops_and_views(rng):
    _register()
    g = rlx.Graph()
    x = g.input("x", (4, 6))
    t = g.transpose(x, (1, 0))                      # strided: the lowering copies it densely
    y = g.op("scaled_add", [t, g.gelu(t)], alpha=2.0)
    g.set_outputs(y=g.softmax(y))
    x_np = rng.standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(rlx.compile(g).run(x=x_np)["y"], rlx.run_reference(g, {"x": x_np})["y"],
                               rtol=1e-5, atol=1e-6)


def test_kernel_that_does_not_compile_raises_kernel_compile_error():
    rlx.register_kernel("broken_op", "RLX_KERNEL broken(int x RLX_IDS) { undeclared_thing; }\n"
                        "RLX_INSTANTIATE(broken, float, broken_op_f32)",
                        reference=lambda xs, attrs, out: xs[0], arity=1, replace=True)
    g = rlx.Graph()
    g.set_outputs(y=g.op("broken_op", [g.input("x", (3,))]))
    with pytest.raises(rlx.KernelCompileError, match="undeclared_thing"):
        rlx.compile(g)


def test_registration_errors():
    with pytest.raises(rlx.GraphError, match="RLX_INSTANTIATE"):
        rlx.register_kernel("nope", "int main() {}", reference=lambda xs, a, o: xs[0])
    _register("twice_op")
    with pytest.raises(rlx.GraphError, match="already registered"):
        rlx.register_kernel("twice_op", SCALED_ADD, reference=lambda xs, a, o: xs[0])
