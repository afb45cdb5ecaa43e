"""Graph IR: dtypes, shapes, op inference (and its error messages), graphs, printer."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rlx
from rlx.errors import DTypeError, GraphError, ShapeError, UnsupportedOpError
from rlx.ir import (
    DType,
    Graph,
    Node,
    OpDef,
    Shape,
    TensorType,
    all_ops,
    broadcast_shapes,
    contiguous_strides,
    f16,
    f32,
    get_op,
    i32,
    i64,
    register_op,
)
from rlx.ir.printer import format_graph

# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("spelling, expected", [
    ("f32", f32), ("float32", f32), ("F32", f32), ("f16", f16), ("float16", f16), ("half", f16),
    ("i32", i32), ("int32", i32), ("i64", i64), ("int64", i64),
    (np.float32, f32), (np.dtype("float16"), f16), (np.int32, i32), (np.dtype(np.int64), i64), (f16, f16),
])
def test_dtype_of(spelling, expected):
    assert DType.of(spelling) is expected


def test_dtype_attributes():
    assert (f32.name, f32.itemsize, f32.numpy, f32.is_float) == ("f32", 4, np.dtype(np.float32), True)
    assert (f16.name, f16.itemsize, f16.is_float) == ("f16", 2, True)
    assert (i32.itemsize, i32.is_float, i64.itemsize, i64.numpy) == (4, False, 8, np.dtype(np.int64))
    assert str(f16) == "f16"
    with pytest.raises(AttributeError):
        f32.name = "x"  # frozen
    assert hash(f32) != hash(f16) and {f32: 1}[DType.of("float32")] == 1
    assert pickle.loads(pickle.dumps(f16)) is f16 and copy.deepcopy(i64) is i64


@pytest.mark.parametrize("bad", ["f64", "float64", np.float64, np.dtype(bool), 3, None, "bf16", float])
def test_dtype_of_rejects(bad):
    with pytest.raises(DTypeError) as e:
        DType.of(bad)
    msg = str(e.value)
    assert repr(bad) in msg and "f32" in msg and "float16" in msg and "int64" in msg


# ---------------------------------------------------------------- shapes


def test_shape_basics():
    s = Shape([2, 3, np.int64(4)])
    assert s == (2, 3, 4) and isinstance(s, tuple)
    assert (s.numel, s.rank) == (24, 3)
    assert Shape(()).numel == 1 and Shape(()).rank == 0
    assert Shape((0, 5)).numel == 0
    assert Shape(s) is s
    assert repr(s) == "(2, 3, 4)"
    assert all(type(d) is int for d in s)


@pytest.mark.parametrize("bad", [(-1, 2), (2.0,), (True, 2), ("a",), 3, "23", (None,)])
def test_shape_rejects(bad):
    with pytest.raises(ShapeError):
        Shape(bad)


@pytest.mark.parametrize("a, b, out", [
    ((2, 3), (3,), (2, 3)), ((2, 1), (1, 4), (2, 4)), ((), (5,), (5,)), ((4, 1, 3), (2, 1), (4, 2, 3)),
    ((1,), (0,), (0,)), ((7,), (7,), (7,)),
])
def test_broadcast_shapes(a, b, out):
    r = broadcast_shapes(a, b)
    assert r == out and isinstance(r, Shape)
    assert r == np.broadcast_shapes(a, b)


def test_broadcast_error_names_both():
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4,\)"):
        broadcast_shapes((2, 3), (4,))


def test_contiguous_strides():
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides(()) == ()
    assert contiguous_strides((5,)) == (1,)
    a = np.zeros((3, 5, 7), np.float32)
    assert contiguous_strides(a.shape) == tuple(s // 4 for s in a.strides)


def test_tensor_type():
    t = TensorType((2, 3), "f16")
    assert t.shape == (2, 3) and isinstance(t.shape, Shape) and t.dtype is f16
    assert t.nbytes == 12 and str(t) == "f16[2,3]" and str(TensorType((), f32)) == "f32[]"
    assert t == TensorType(Shape((2, 3)), f16) and hash(t) == hash(TensorType([2, 3], np.float16))
    with pytest.raises(AttributeError):  # frozen
        t.shape = (1,)


# ---------------------------------------------------------------- registry


def test_registry():
    names = set(all_ops())
    assert {"input", "param", "constant", "add", "mul", "gelu", "silu", "softmax", "layernorm", "gather",
            "matmul", "reshape", "transpose", "narrow", "copy", "cast"} <= names
    assert {n for n, d in all_ops().items() if d.is_view} == {"reshape", "transpose", "narrow", "frames", "real",
                                                                  "imag"}
    assert get_op("add").arity == 2 and get_op("layernorm").arity == 3 and get_op("input").arity == 0
    assert get_op("gelu").doc
    with pytest.raises(UnsupportedOpError, match=r"'frobnicate'.*matmul"):
        get_op("frobnicate")
    with pytest.raises(GraphError, match="already registered"):
        register_op(OpDef("add", 2, lambda t, a: t[0]))


# ---------------------------------------------------------------- op inference


@pytest.fixture
def g():
    return Graph()


def test_leaves(g):
    x = g.input("x", (2, 3))
    w = g.param("w", [3], "f16")
    c = g.constant(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert (x.shape, x.dtype, x.op, x.name) == ((2, 3), f32, "input", "x")
    assert (w.dtype, w.op, w.attrs["dtype"], w.attrs["shape"]) == (f16, "param", f16, (3,))
    assert c.dtype is f32 and c.shape == (2, 3) and c.attrs["value"].dtype == np.float32
    assert not c.attrs["value"].flags.writeable
    assert g.constant([1, 2]).dtype is i64
    assert g.constant(np.array([1, 2], np.int32)).dtype is i32
    assert g.constant(np.float16(1.0)).dtype is f16 and g.constant(0.5).shape == ()
    assert g.constant([1.0], dtype="f16", name="one").name == "one"
    with pytest.raises(DTypeError):
        g.constant([True, False])
    with pytest.raises(DTypeError, match="fit"):
        g.constant([2**40], dtype="i32")
    with pytest.raises(DTypeError):
        g.input("bad", (2,), "f64")
    with pytest.raises(ShapeError):
        g.input("bad", (2, -3))
    assert list(g.inputs) == ["x"] and list(g.params) == ["w"] and len(g.constants) == 6
    assert all(n.op == "constant" for n in g.constants)


def test_leaves_through_generic_op(g):
    x = g.op("input", (), name="x", shape=[2, 3])
    assert x.type == TensorType((2, 3), f32) and g.inputs["x"] is x and x.name == "x"
    p = g.op("param", (), name="p", shape=(4,), dtype="half")
    assert g.params["p"] is p and p.dtype is f16
    with pytest.raises(GraphError, match="missing required attribute 'name'"):
        g.op("input", (), shape=(2,))


def test_constant_does_not_alias_user_array(g):
    a = np.ones(3, np.float32)
    c = g.constant(a)
    a[0] = 5
    assert c.attrs["value"][0] == 1


def test_duplicate_names(g):
    g.input("x", (2,))
    g.param("w", (2,))
    with pytest.raises(GraphError, match="'x'"):
        g.input("x", (3,))
    with pytest.raises(GraphError, match="'w'"):
        g.param("w", (2,))
    with pytest.raises(GraphError, match="'x'"):
        g.param("x", (2,))


def test_foreign_node():
    g1, g2 = Graph(), Graph()
    a = g1.input("a", (2,))
    b = g2.input("b", (2,))
    with pytest.raises(GraphError, match="another graph"):
        g1.add(a, b)
    with pytest.raises(GraphError, match="another graph"):
        g1.set_outputs(y=b)
    with pytest.raises(GraphError, match="not a Node"):
        g1.op("add", [a, np.ones(2)])


@pytest.mark.parametrize("op", ["add", "mul"])
def test_binary(g, op):
    a = g.input("a", (4, 1, 3))
    b = g.input("b", (2, 1))
    y = getattr(g, op)(a, b)
    assert y.shape == (4, 2, 3) and y.dtype is f32 and y.op == op and y.inputs == (a, b)
    c = g.input("c", (5,))
    with pytest.raises(ShapeError) as e:
        getattr(g, op)(a, c)
    msg = str(e.value)
    assert msg.startswith(op) and "(4, 1, 3)" in msg and "(5,)" in msg and "node %" in msg
    h = g.input("h", (3,), "f16")
    with pytest.raises(DTypeError, match=f"{op}.*f32.*f16"):
        getattr(g, op)(a, h)
    n = g.input("n", (3,), "i32")
    with pytest.raises(DTypeError, match="float"):
        getattr(g, op)(n, n)


def test_node_operators(g):
    a = g.input("a", (2, 3), "f16")
    b = g.input("b", (3,), "f16")
    s = a + b
    m = a * b
    assert (s.op, s.inputs, s.shape, s.dtype) == ("add", (a, b), (2, 3), f16)
    assert (m.op, m.inputs) == ("mul", (a, b))
    h = a * 0.5
    assert h.op == "mul" and h.inputs[1].op == "constant" and h.inputs[1].dtype is f16
    r = 2 + a
    assert r.op == "add" and r.inputs[1] is a
    with pytest.raises(TypeError):
        a + "x"  # noqa: B018


def test_unary(g):
    x = g.input("x", (2, 5), "f16")
    ge = g.gelu(x)
    assert ge.type == x.type and ge.attrs == {"approximate": "none"}
    assert g.gelu(x, approximate="tanh").attrs["approximate"] == "tanh"
    assert g.silu(x).type == x.type
    with pytest.raises(GraphError, match="approximate"):
        g.gelu(x, approximate="fast")
    n = g.input("n", (2,), "i64")
    with pytest.raises(DTypeError, match="gelu.*i64"):
        g.gelu(n)
    with pytest.raises(DTypeError, match="silu"):
        g.silu(n)


def test_softmax(g):
    x = g.input("x", (2, 3, 4))
    assert g.softmax(x).attrs["axis"] == 2
    assert g.softmax(x, axis=2).attrs["axis"] == 2
    assert g.softmax(x, axis=-1).type == x.type
    with pytest.raises(ShapeError, match=r"softmax.*last axis.*\(2, 3, 4\)"):
        g.softmax(x, axis=1)
    with pytest.raises(ShapeError, match="out of range"):
        g.softmax(x, axis=3)
    with pytest.raises(ShapeError):
        g.softmax(g.input("s", ()))


def test_layernorm(g):
    x = g.input("x", (2, 7, 8), "f16")
    w, b = g.param("w", (8,), "f16"), g.param("b", (8,), "f16")
    y = g.layernorm(x, w, b)
    assert y.type == x.type and y.attrs["eps"] == 1e-5
    assert g.layernorm(x, w, b, eps=1e-12).attrs["eps"] == 1e-12
    bad = g.param("bad", (7,), "f16")
    with pytest.raises(ShapeError) as e:
        g.layernorm(x, bad, b)
    assert "layernorm" in str(e.value) and "(7,)" in str(e.value) and "(2, 7, 8)" in str(e.value)
    w32 = g.param("w32", (8,))
    with pytest.raises(DTypeError, match="layernorm"):
        g.layernorm(x, w32, b)
    with pytest.raises(GraphError, match="eps"):
        g.layernorm(x, w, b, eps=-1.0)


def test_gather(g):
    table = g.param("emb", (100, 16), "f16")
    for idt in ("i32", "i64"):
        idx = g.input(f"ids_{idt}", (2, 7), idt)
        y = g.gather(table, idx)
        assert y.shape == (2, 7, 16) and y.dtype is f16
    assert g.gather(table, g.input("s", (), "i32")).shape == (16,)
    with pytest.raises(DTypeError, match="gather.*indices"):
        g.gather(table, g.input("fidx", (3,)))
    with pytest.raises(ShapeError, match=r"gather.*\(100, 16, 1\)"):
        g.gather(g.param("t3", (100, 16, 1)), g.input("i", (3,), "i32"))
    with pytest.raises(DTypeError, match="table"):
        g.gather(g.param("it", (4, 4), "i32"), g.input("j", (3,), "i32"))


def test_matmul(g):
    a = g.input("a", (2, 5, 3))
    assert g.matmul(a, g.param("w", (3, 4))).shape == (2, 5, 4)
    assert g.matmul(a, g.param("wt", (4, 3)), transpose_b=True).shape == (2, 5, 4)
    assert g.matmul(a, g.input("bb", (2, 3, 6))).shape == (2, 5, 6)
    y = g.matmul(a, g.input("bbt", (2, 6, 3)), transpose_b=True)
    assert y.shape == (2, 5, 6) and y.attrs == {"transpose_b": True}
    assert g.matmul(g.input("m2", (5, 3)), g.param("w2", (3, 1))).shape == (5, 1)
    with pytest.raises(ShapeError) as e:
        g.matmul(a, g.param("wbad", (4, 4)))
    assert "matmul" in str(e.value) and "(2, 5, 3)" in str(e.value) and "(4, 4)" in str(e.value)
    with pytest.raises(ShapeError, match="batch"):
        g.matmul(a, g.input("bb3", (3, 3, 6)))
    with pytest.raises(ShapeError, match="rank"):
        g.matmul(g.input("v", (3,)), g.param("w3", (3, 4)))
    with pytest.raises(ShapeError):
        g.matmul(g.input("r4", (2, 2, 5, 3)), g.input("r3", (2, 3, 4)))
    with pytest.raises(DTypeError, match="matmul"):
        g.matmul(a, g.param("w16", (3, 4), "f16"))
    with pytest.raises(GraphError, match="transpose_b"):
        g.matmul(a, g.param("w4", (3, 4)), transpose_b="yes")


def test_reshape(g):
    x = g.input("x", (2, 3, 4))
    y = g.reshape(x, (6, -1))
    assert y.shape == (6, 4) and y.attrs["shape"] == (6, 4) and get_op("reshape").is_view
    assert g.reshape(x, [24]).shape == (24,)
    assert g.reshape(g.reshape(x, (1, 24)), (2, 12)).shape == (2, 12)
    with pytest.raises(ShapeError, match=r"reshape.*\(2, 3, 4\).*\(5, 5\)"):
        g.reshape(x, (5, 5))
    with pytest.raises(ShapeError, match="one -1"):
        g.reshape(x, (-1, -1))
    with pytest.raises(ShapeError):
        g.reshape(x, (7, -1))
    with pytest.raises(ShapeError):
        g.reshape(x, (-2, -12))


def test_transpose(g):
    x = g.input("x", (2, 3, 4), "f16")
    y = g.transpose(x, (2, 0, 1))
    assert y.shape == (4, 2, 3) and y.dtype is f16 and y.attrs["perm"] == (2, 0, 1)
    assert g.transpose(x, [0, 2, 1]).attrs["perm"] == (0, 2, 1)
    with pytest.raises(ShapeError, match=r"transpose.*\(0, 0, 1\)"):
        g.transpose(x, (0, 0, 1))
    with pytest.raises(ShapeError):
        g.transpose(x, (0, 1))


def test_narrow(g):
    x = g.input("x", (2, 10, 4))
    y = g.narrow(x, 1, 3, 5)
    assert y.shape == (2, 5, 4) and y.attrs == {"axis": 1, "start": 3, "length": 5}
    assert g.narrow(x, -1, 0, 4).attrs["axis"] == 2
    assert g.narrow(x, 1, 10, 0).shape == (2, 0, 4)
    with pytest.raises(ShapeError, match=r"narrow.*size 10.*\(2, 10, 4\)"):
        g.narrow(x, 1, 6, 5)
    with pytest.raises(ShapeError):
        g.narrow(x, 1, -1, 2)
    with pytest.raises(ShapeError):
        g.narrow(x, 3, 0, 1)


def test_copy_cast(g):
    x = g.input("x", (2, 3), "f16")
    assert g.copy(x).type == x.type and not get_op("copy").is_view
    c = g.cast(x, "float32")
    assert c.dtype is f32 and c.shape == (2, 3) and c.attrs["dtype"] is f32
    with pytest.raises(DTypeError, match="cast"):
        g.cast(x, "i32")
    with pytest.raises(DTypeError, match="cast"):
        g.cast(g.input("n", (2,), "i32"), "f32")
    with pytest.raises(DTypeError):
        g.cast(x, "f64")


def test_bad_attrs_and_arity(g):
    x = g.input("x", (2, 3))
    with pytest.raises(GraphError, match="transposeb"):
        g.op("matmul", [x, x], transposeb=True)
    with pytest.raises(GraphError, match="expects 2"):
        g.op("add", [x])
    with pytest.raises(GraphError, match="missing required attribute 'perm'"):
        g.op("transpose", [x])
    with pytest.raises(UnsupportedOpError, match="nope"):
        g.op("nope", [x])


def test_failed_node_is_not_added(g):
    x = g.input("x", (2, 3))
    with pytest.raises(ShapeError):
        g.reshape(x, (5,))
    assert len(g.nodes) == 1
    assert g.silu(x).id == 1


# ---------------------------------------------------------------- generic op with a user op


def test_user_registered_op(g):
    def infer(types, attrs):
        attrs.setdefault("scale", 1.0)
        (t,) = types
        if not t.dtype.is_float:
            raise DTypeError(f"test_double_last: needs float, got {t}")
        return TensorType(tuple(t.shape[:-1]) + (2 * t.shape[-1],), t.dtype)

    register_op(OpDef("test_double_last", 1, infer, doc="test op"), replace=True)
    x = g.input("x", (3, 4), "f16")
    y = g.op("test_double_last", [x], name="dbl")
    assert y.shape == (3, 8) and y.dtype is f16 and y.attrs == {"scale": 1.0} and y.name == "dbl"
    with pytest.raises(DTypeError, match=r"test_double_last.*node %"):
        g.op("test_double_last", [g.input("n", (2,), "i32")])
    g.set_outputs(y=y)
    g.validate()
    assert "test_double_last(%0, scale=1.0)" in str(g)

    register_op(OpDef("test_concat_any", -1, lambda ts, a: ts[0]), replace=True)
    assert g.op("test_concat_any", [x, x, x]).inputs == (x, x, x)


def test_ir_errors_name_the_problem():
    g = rlx.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(rlx.ShapeError, match="weight shape"):
        g.rmsnorm(x, g.param("w", (5,)))
    with pytest.raises(rlx.GraphError, match="activation"):
        g.linear(x, g.param("w2", (6, 4)), activation="swish")
    with pytest.raises(rlx.ShapeError, match="has K=4"):
        g.linear(x, g.param("w3", (6, 5)))
    with pytest.raises(rlx.ShapeError, match="does not broadcast"):
        g.masked_softmax(x, g.input("m", (5,)))
    with pytest.raises(rlx.ShapeError, match="outside axis"):
        g.concat([x, g.input("y", (2, 5))], axis=0)


# ---------------------------------------------------------------- graph structure


def _mlp():
    g = Graph()
    x = g.input("x", (2, 3))
    w = g.param("w", (3, 4))
    b = g.param("b", (4,))
    h = g.add(g.matmul(x, w), b)
    y = g.gelu(h, name="act")
    dead = g.silu(x)
    return g, x, w, b, h, y, dead


def test_node_basics():
    g, x, w, b, h, y, dead = _mlp()
    assert isinstance(y, Node)
    assert len({n.id for n in g.nodes}) == len(g.nodes)
    assert repr(h) == f"%{h.id} = add(%{h.inputs[0].id}, %{b.id}) : f32[2,4]"
    assert repr(y).endswith("  # act")
    assert {x: 1, y: 2}[y] == 2 and x != g.input("x2", (2, 3))


def test_outputs_and_topo_order():
    g, x, w, b, h, y, dead = _mlp()
    with pytest.raises(GraphError, match="no outputs"):
        g.topo_order()
    g.set_outputs(y=y)
    order = g.topo_order()
    assert dead not in order and order[-1] is y
    pos = {n: i for i, n in enumerate(order)}
    for n in order:
        assert all(pos[i] < pos[n] for i in n.inputs)
    g.set_outputs({"x": h}, y=y)
    assert list(g.outputs) == ["x", "y"]  # an output may share an input's name
    with pytest.raises(GraphError):
        g.set_outputs()
    with pytest.raises(GraphError, match="not a Node"):
        g.set_outputs(y=3)


def test_consumers():
    g, x, w, b, h, y, dead = _mlp()
    sq = g.mul(y, y)
    g.set_outputs(out=sq, h=h)
    cons = g.consumers()
    assert cons[y] == [sq]  # once, even though sq reads y twice
    assert cons[h] == [y]
    assert cons[sq] == []
    assert dead not in cons and len(cons[x]) == 1


def test_cycle_detection():
    g, x, w, b, h, y, dead = _mlp()
    g.set_outputs(y=y)
    mm = h.inputs[0]
    mm.inputs = (y, w)  # y -> h -> mm -> y
    with pytest.raises(GraphError, match="cycle") as e:
        g.topo_order()
    assert f"%{y.id}" in str(e.value) and f"%{mm.id}" in str(e.value)
    with pytest.raises(GraphError, match="cycle"):
        g.validate()
    str(g)  # the printer still works on a cyclic graph


def test_self_cycle():
    g = Graph()
    x = g.input("x", (2,))
    y = g.silu(x)
    y.inputs = (y,)
    g.set_outputs(y=y)
    with pytest.raises(GraphError, match="cycle"):
        g.topo_order()


def test_validate_catches_mutation():
    g, x, w, b, h, y, dead = _mlp()
    g.set_outputs(y=y)
    g.validate()
    h.inputs = (h.inputs[0], g.param("b2", (5,)))
    with pytest.raises(ShapeError, match="add"):
        g.validate()
    h.inputs = (h.inputs[0], g.param("b3", (4,), "f16"))
    with pytest.raises(DTypeError):
        g.validate()
    h.inputs = (h.inputs[0], b)
    g.validate()
    y.type = TensorType((2, 4), "f16")
    with pytest.raises(GraphError, match="stored type"):
        g.validate()


def test_mutation_with_foreign_node():
    g, x, w, b, h, y, dead = _mlp()
    g.set_outputs(y=y)
    other = Graph().param("b", (4,))
    h.inputs = (h.inputs[0], other)
    with pytest.raises(GraphError, match="another graph"):
        g.topo_order()


def test_large_chain_no_recursion_limit():
    g = Graph()
    x = g.input("x", (4,))
    for _ in range(5000):
        x = g.silu(x)
    g.set_outputs(y=x)
    assert len(g.topo_order()) == 5001


# ---------------------------------------------------------------- printer


def test_printer():
    g = Graph()
    x = g.input("ids", (1, 7), "i32")
    emb = g.param("emb", (10, 4), "f16")
    e = g.gather(emb, x, name="embed")
    c = g.constant(np.array([1.0, 2.0, 3.0, 4.0], np.float16))
    s = g.softmax(g.mul(e, c), name="probs")
    t = g.transpose(s, (0, 2, 1))
    g.set_outputs(out=t, ids=x)
    text = str(g)
    assert text == format_graph(g)
    lines = [ln.strip() for ln in text.splitlines()]
    assert "ids: i32[1,7]" in lines[1] and "emb: f16[10,4]" in lines[2]
    assert f"%{e.id} = gather(%{emb.id}, %{x.id}) : f16[1,7,4]  # embed" in lines
    assert f"%{x.id} = input() : i32[1,7]  # ids" in lines
    assert f"%{c.id} = constant(value=[1.0, 2.0, 3.0, 4.0]) : f16[4]" in lines
    assert f"%{s.id} = softmax(%{s.inputs[0].id}, axis=2) : f16[1,7,4]  # probs" in lines
    assert f"%{t.id} = transpose(%{s.id}, perm=(0, 2, 1)) : f16[1,4,7]" in lines
    assert lines[0] == "graph" and lines[-1] == f"outputs: out = %{t.id}, ids = %{x.id}"
    big = g.constant(np.zeros((100, 100), np.float32))
    g.set_outputs(out=g.add(big, big))
    assert "<array float32[100, 100]>" in str(g)


def test_printer_without_outputs():
    g = Graph()
    x = g.input("x", (2,))
    g.silu(x)
    text = str(g)
    assert "silu(%0)" in text and "outputs: none" in text


def test_every_op_declares_its_view_and_precision_facts_once():
    """Passes read OpDef.is_view / OpDef.precision (no side tables): views
    are "fixed" for precision, leaves are "leaf", and a bad class is refused."""
    from rlx.ir.op import PRECISION_CLASSES, all_ops

    ops = all_ops()
    assert {n for n, d in ops.items() if d.is_view} >= {"reshape", "transpose", "narrow"}
    assert all(d.precision == "fixed" for d in ops.values() if d.is_view)
    assert {n for n, d in ops.items() if d.precision == "leaf"} >= {"input", "param", "constant"}
    assert {"layernorm", "softmax", "masked_softmax", "sum"} <= {n for n, d in ops.items()
                                                                 if d.precision == "f32_under_auto"}
    assert all(d.precision in PRECISION_CLASSES for d in ops.values())
    with pytest.raises(GraphError, match="precision"):
        OpDef("test_bad_class", 1, lambda ts, a: ts[0], precision="sometimes")
