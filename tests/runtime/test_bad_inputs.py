"""Bad input at every public entry point (DESIGN section 5): each mistake
raises a subclass of rlx.RlxError naming the problem, the process never
crashes, and an executable keeps working after a failed run.

Cases run in child processes, so a segfault or abort fails its group
instead of killing the test run. One child runs a group of cases, each in
its own try/except, and prints one JSON line per case; it prints the
case's label before starting it, so a crash names the case that caused it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import _DEVICE

import rlx

OK = "ok"   # the case must run without raising


@dataclass(frozen=True)
class Case:
    label: str
    code: str                       # statements, exec'd in the child's globals
    expect: str | tuple[str, ...]   # exception class name(s), or OK
    match: str = ""                 # a substring the message must contain


# The child: runs every case, reports the class of what it raised, whether
# that is an RlxError, and the message. `before` (if any) runs before each
# case, inside its try (a fresh graph); `after` runs after each case: the
# executable must still give the right answer after a failed run.
_CHILD = '''
import json, sys, warnings
import numpy as np
import rlx

def _report(label, **fields):
    print("RESULT " + json.dumps(dict(label=label, **fields)), flush=True)

{setup}

for _label, _code in json.loads({cases!r}):
    print("START " + _label, flush=True)
    try:
        exec({before!r}, globals())
        exec(_code, globals())
        _report(_label, got="ok", rlx=True, msg="")
    except Exception as e:
        _report(_label, got=type(e).__name__, rlx=isinstance(e, rlx.RlxError), msg=str(e)[:400])
    if {after!r}:
        try:
            exec({after!r}, globals())
        except Exception as e:
            _report(_label + " [after]", got=type(e).__name__, rlx=False, msg=str(e)[:400])
print("DONE", flush=True)
'''


def run_group(cases: list[Case], setup: str = "", before: str = "", after: str = "", timeout: float = 120) -> None:
    """Run ``cases`` in one child process; fail with every mismatch listed."""
    code = _CHILD.format(setup=textwrap.dedent(setup), before=textwrap.dedent(before), after=textwrap.dedent(after),
                         cases=json.dumps([(c.label, textwrap.dedent(c.code)) for c in cases]))
    env = {**os.environ, "RLX_CALIBRATE": "0", "RLX_DEVICE": _DEVICE["name"]}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    lines = proc.stdout.splitlines()
    started = [ln[6:] for ln in lines if ln.startswith("START ")]
    assert proc.returncode == 0 and "DONE" in lines, (
        f"child exited with {proc.returncode} during case {started[-1] if started else '(setup)'!r}\n"
        f"stdout tail:\n{proc.stdout[-2000:]}\nstderr tail:\n{proc.stderr[-3000:]}")
    results = [json.loads(ln[7:]) for ln in lines if ln.startswith("RESULT ")]
    by_label = {r["label"]: r for r in results}
    problems = [f"{r['label']}: {r['got']}: {r['msg']}" for r in results if r["label"].endswith(" [after]")]
    for c in cases:
        r = by_label[c.label]
        expect = (c.expect,) if isinstance(c.expect, str) else c.expect
        if r["got"] not in expect:
            problems.append(f"{c.label}: expected {' or '.join(expect)}, got {r['got']}: {r['msg']}")
        elif r["got"] != OK and not r["rlx"]:
            problems.append(f"{c.label}: {r['got']} is not an rlx.RlxError: {r['msg']}")
        elif c.match and c.match not in r["msg"]:
            problems.append(f"{c.label}: message lacks {c.match!r}: {r['msg']}")
    assert not problems, "\n".join(problems)


def _cases(expect: str, match: str = "", **codes: str) -> list[Case]:
    return [Case(label, code, expect, match) for label, code in codes.items()]


# ---------------------------------------------------------------- the graph builder


def test_graph_builder_shapes():
    limit = "MAX_ELEMENTS"
    run_group(
        _cases("ShapeError", limit,
               input_2_40="g.input('x', (2**40,))",
               input_2_62_squared="g.input('x', (2**62, 2**62))",
               input_just_over="g.input('x', (2**31,))",
               input_empty_but_huge_stride="g.input('x', (0, 2**40))",
               param_huge="g.param('w', (2**20, 2**20))",
               broadcast_output="g.add(g.input('a', (2**16, 1)), g.input('b', (1, 2**16)))",
               matmul_output="g.matmul(g.input('a', (2**16, 1)), g.input('b', (1, 2**16)))",
               concat_output="g.concat([g.input('a', (2**30,)), g.input('b', (2**30,))], axis=0)",
               gather_output="g.gather(g.param('t', (4, 2**20)), g.input('i', (2**12,), 'i32'))",
               reshape_output="g.reshape(g.input('a', (0,)), (2**31, 0))",
               attention_output="g.attention(g.input('q', (1, 2**12, 16, 1)), g.input('k', (1, 1, 16, 1)), "
                                "g.input('v', (1, 1, 16, 2**16)))")
        + _cases("ShapeError",
                 negative="g.input('x', (3, -1))",
                 float_dim="g.input('x', (2.5,))",
                 integral_float_dim="g.input('x', (2.0,))",
                 str_dim="g.input('x', ('3',))",
                 bool_dim="g.input('x', (True,))",
                 not_a_sequence="g.input('x', 5)",
                 a_string="g.input('x', 'abc')",
                 none_shape="g.input('x', None)",
                 reshape_bad_count="g.reshape(g.input('a', (6,)), (4, 2))",
                 reshape_two_minus_one="g.reshape(g.input('a', (6,)), (-1, -1))",
                 reshape_minus_two="g.reshape(g.input('a', (6,)), (-2, -3))",
                 reshape_not_sequence="g.reshape(g.input('a', (6,)), 'ab')",
                 softmax_axis_out_of_range="g.softmax(g.input('a', (2, 3)), axis=5)",
                 softmax_not_last_axis="g.softmax(g.input('a', (2, 3)), axis=0)",
                 narrow_out_of_bounds="g.narrow(g.input('a', (2, 3)), 1, 2, 5)",
                 transpose_not_a_perm="g.transpose(g.input('a', (2, 3)), (0, 0))",
                 no_broadcast="g.add(g.input('a', (2, 3)), g.input('b', (4,)))",
                 matmul_inner="g.matmul(g.input('a', (2, 3)), g.input('b', (4, 5)))",
                 gather_1d_table="g.gather(g.param('t', (4,)), g.input('i', (2,), 'i32'))")
        + _cases(OK,
                 at_the_limit="g.input('x', (2**31 - 1,))",
                 numpy_int_dims="g.input('x', (np.int64(3), np.int32(2)))",
                 empty_dims="g.input('x', (0, 5))",
                 scalar="g.input('x', ())"),
        before="g = rlx.Graph()")


def test_graph_builder_dtypes_attrs_and_types():
    run_group(
        _cases("DTypeError",
               f64="g.input('x', (2,), 'f64')",
               int_dtype="g.input('x', (2,), 5)",
               none_dtype="g.input('x', (2,), None)",
               bf16_input="g.input('x', (2,), 'bf16')",
               numpy_f64="g.input('x', (2,), np.float64)",
               add_mixed="g.add(g.input('a', (2,)), g.input('b', (2,), 'i32'))",
               gelu_int="g.gelu(g.input('a', (2,), 'i32'))",
               float_indices="g.gather(g.param('t', (4, 2)), g.input('i', (2,)))",
               cast_to_int="g.cast(g.input('a', (2,)), 'i32')",
               constant_strings="g.constant(np.array(['a', 'b']))",
               constant_objects="g.constant(np.array([object()]))",
               constant_huge_int="g.constant([2**70])",
               # complex constants are c64 (the FFT family); not as a float dtype, nor in other ops
               constant_complex_as_f32="g.constant(np.array([1j]), dtype='f32')",
               add_complex="g.add(g.constant(np.array([1j])), g.constant(np.array([2j])))",
               constant_float_as_int="g.constant([1.5], dtype='i32')")
        + _cases("GraphError",
                 name_none="g.input(None, (2,))",
                 name_empty="g.input('', (2,))",
                 name_int="g.input(5, (2,))",
                 duplicate_name="g.input('d', (2,)); g.param('d', (2,))",
                 add_python_number="g.add(g.input('a', (2,)), 3)",
                 add_string="g.add(g.input('a', (2,)), 'b')",
                 other_graph_node="g.add(g.input('a', (2,)), rlx.Graph().input('b', (2,)))",
                 wrong_arity="g.op('add', (g.input('a', (2,)),))",
                 unknown_attr="g.op('softmax', (g.input('a', (2,)),), axs=0)",
                 axis_not_int="g.sum(g.input('a', (2,)), axis='a')",
                 gelu_approx="g.gelu(g.input('a', (2,)), approximate='fast')",
                 eps_str="g.layernorm(g.input('a', (2,)), g.param('w', (2,)), g.param('b', (2,)), eps='x')",
                 transpose_b_str="g.matmul(g.input('a', (2, 2)), g.input('b', (2, 2)), transpose_b='yes')",
                 output_not_node="g.set_outputs(y=3)",
                 no_outputs="g.set_outputs()",
                 output_name_empty="g.set_outputs({'': g.input('a', (2,))})",
                 topo_without_outputs="rlx.Graph().topo_order()")
        + _cases("UnsupportedOpError", unknown_op="g.op('nope', ())"),
        before="g = rlx.Graph()")


# ---------------------------------------------------------------- rlx.compile


_GATHER_SETUP = """
g = rlx.Graph()
g.set_outputs(y=g.gather(g.param('t', (4, 2)), g.input('i', (2,), 'i32')))
T = np.arange(8, dtype=np.float32).reshape(4, 2)
P = {'t': T}
"""


def test_compile_arguments():
    run_group(
        _cases("ConfigError",
               unknown_device="rlx.compile(g, device='tpu', params=P)",
               device_int="rlx.compile(g, device=3, params=P)",
               device_bad_index="rlx.compile(g, device='cpu:x', params=P)",
               device_negative_index="rlx.compile(g, device='cuda:-1', params=P)",
               precision_f64="rlx.compile(g, precision='f64', params=P)",
               precision_int="rlx.compile(g, precision=5, params=P)",
               precision_none="rlx.compile(g, precision=None, params=P)",
               unknown_pass="rlx.compile(g, passes={'nope': True}, params=P)",
               precision_without_pass="rlx.compile(g, precision='f16', passes={'precision': False}, params=P)")
        + _cases("ParameterError",
                 missing="rlx.compile(g)",
                 wrong_shape="rlx.compile(g, params={'t': np.zeros((2, 4), np.float32)})",
                 int_for_float="rlx.compile(g, params={'t': np.zeros((4, 2), np.int32)})",
                 string="rlx.compile(g, params={'t': 'abc'})",
                 none="rlx.compile(g, params={'t': None})",
                 an_object="rlx.compile(g, params={'t': object()})",
                 ragged="rlx.compile(g, params={'t': [[1.0, 2.0], [3.0]]})",
                 huge_int_list="rlx.compile(g, params={'t': [[2**70] * 2] * 4})")
        + _cases("GraphError", no_outputs="rlx.compile(rlx.Graph())")
        + _cases("UnsupportedOpError", rank_7_binary="""
                 h = rlx.Graph()
                 h.set_outputs(y=h.add(h.input('a', (1,) * 7), h.input('b', (1,) * 7)))
                 rlx.compile(h)""")
        + _cases(("ok", "DeviceUnavailableError"), metal="rlx.compile(g, device='metal', params=P)")
        + _cases(OK,
                 nan_params="rlx.compile(g, params={'t': np.full((4, 2), np.nan, np.float32)})",
                 f64_params_convert="rlx.compile(g, params={'t': T.astype(np.float64)})",
                 list_params="rlx.compile(g, params={'t': T.tolist()})",
                 non_contiguous_params="rlx.compile(g, params={'t': np.asfortranarray(T)})"),
        setup=_GATHER_SETUP)


def test_compile_non_mapping_arguments():
    run_group(_cases("ConfigError", passes_list="rlx.compile(g, passes=['fusion'], params=P)")
              + _cases("ParameterError", params_list="rlx.compile(g, params=[T])")
              + _cases("GraphError", not_a_graph="rlx.compile('g')"),
              setup=_GATHER_SETUP)


# ---------------------------------------------------------------- Executable.run


_RUN_SETUP = _GATHER_SETUP + """
exe = rlx.compile(g, params=P)
a = rlx.Graph()
a.set_outputs(z=a.add(a.input('x', (2, 3)), a.input('y', (2, 3))))
add = rlx.compile(a)
X = np.arange(6, dtype=np.float32).reshape(2, 3)
I = np.array([3, 1], np.int32)
"""

# After every case, both executables must still give the right answer.
_STILL_WORKS = """
assert np.array_equal(exe.run(i=I)['y'], T[I])
assert np.array_equal(add.run(x=X, y=X)['z'], X + X)
"""


def test_run_rejects_bad_inputs_and_stays_usable():
    run_group(
        _cases("InputError",
               unknown_name="exe.run(j=I)",
               missing="exe.run()",
               missing_of_two="add.run(x=X)",
               extra="exe.run(i=I, j=I)",
               wrong_shape="exe.run(i=np.array([1, 2, 3], np.int32))",
               wrong_dtype="add.run(x=X.astype(np.float64), y=X)",
               int64_for_i32="exe.run(i=I.astype(np.int64))",
               big_endian="add.run(x=X.astype('>f4'), y=X)",
               bool_array="add.run(x=X > 1, y=X)",
               python_scalar="add.run(x=1.0, y=X)",
               zero_d_array="add.run(x=np.array(1.0, np.float32), y=X)",
               none="exe.run(i=None)",
               an_object="add.run(x=object(), y=X)",
               strings="exe.run(i=['a', 'b'])",
               string_array="exe.run(i=np.array(['a', 'b']))",
               huge_int="exe.run(i=[2**70, 0])",
               int_beyond_i32="exe.run(i=[2**40, 0])",
               float_for_int="exe.run(i=[1.5, 0.0])",
               integral_float_for_int="exe.run(i=[1.0, 0.0])",
               bool_list_for_int="exe.run(i=[True, False])",
               float_overflowing_f32="add.run(x=[[1e300] * 3] * 2, y=X)",
               ragged_list="add.run(x=[[1.0, 2.0, 3.0], [4.0]], y=X)",
               index_too_large="exe.run(i=np.array([4, 0], np.int32))",
               index_negative="exe.run(i=np.array([-1, 0], np.int32))",
               index_list_out_of_range="exe.run(i=[0, 99])",
               list_of_arrays="exe.run([I])",
               list_of_2d_arrays="add.run([X, X])",
               positional_array="exe.run(I)",
               positional_string="exe.run('i')",
               positional_int="exe.run(5)",
               non_str_keys="exe.run({1: I, None: I})",
               non_str_key_one="exe.run({0: I})")
        + _cases(OK,
                 non_contiguous="""
                     wide = np.array([3, 9, 1, 9], np.int32)[::2]
                     assert not wide.flags.c_contiguous
                     assert np.array_equal(exe.run(i=wide)['y'], T[I])
                     xt = np.ascontiguousarray(X.T).T
                     assert np.array_equal(add.run(x=xt, y=X)['z'], X + X)""",
                 int_list="assert np.array_equal(exe.run(i=[3, 1])['y'], T[I])",
                 numpy_int_scalars="assert np.array_equal(exe.run(i=[np.int64(3), np.int8(1)])['y'], T[I])",
                 float_lists="assert np.array_equal(add.run(x=X.tolist(), y=X)['z'], X + X)",
                 int_list_for_float="assert np.array_equal(add.run(x=[[0, 1, 2], [3, 4, 5]], y=X)['z'], X + X)",
                 pairs="assert np.array_equal(exe.run([('i', I)])['y'], T[I])",
                 nan_runs="""
                     z = add.run(x=np.full((2, 3), np.nan, np.float32), y=X)['z']
                     assert np.isnan(z).all()""",
                 inf_runs="assert np.isinf(add.run(x=np.full((2, 3), np.inf, np.float32), y=X)['z']).all()",
                 index_edges="assert np.array_equal(exe.run(i=np.array([0, 3], np.int32))['y'], T[[0, 3]])"),
        setup=_RUN_SETUP, after=_STILL_WORKS)


def test_set_params():
    run_group(
        _cases("ParameterError",
               unknown="exe.set_params(u=T)",
               wrong_shape="exe.set_params(t=T.T)",
               int_for_float="exe.set_params(t=T.astype(np.int32))",
               string="exe.set_params(t='abc')",
               none="exe.set_params(t=None)",
               ragged="exe.set_params(t=[[1.0, 2.0], [3.0]])",
               huge_int="exe.set_params(t=[[2**70] * 2] * 4)",
               positional_list="exe.set_params([T])",
               non_str_keys="exe.set_params({1: T, None: T})")
        + _cases(OK,
                 nan_values="exe.set_params(t=np.full((4, 2), np.nan, np.float32)); exe.set_params(t=T)",
                 f64_values="exe.set_params(t=T.astype(np.float64))",
                 replaced="""
                     exe.set_params(t=T * 2)
                     assert np.array_equal(exe.run(i=I)['y'], (T * 2)[I])
                     exe.set_params({'t': T})"""),
        setup=_RUN_SETUP, after=_STILL_WORKS)


def test_run_reference():
    run_group(
        _cases("InputError",
               missing_input="rlx.run_reference(g, {}, P)",
               unknown_input="rlx.run_reference(g, {'i': I, 'j': I}, P)",
               wrong_shape="rlx.run_reference(g, {'i': I[:1]}, P)",
               wrong_dtype="rlx.run_reference(g, {'i': I.astype(np.int64)}, P)",
               float_indices="rlx.run_reference(g, {'i': [1.5, 0.0]}, P)",
               index_out_of_range="rlx.run_reference(g, {'i': np.array([4, 0], np.int32)}, P)",
               inputs_none="rlx.run_reference(g, None, P)",
               inputs_list="rlx.run_reference(g, [I], P)",
               ragged="rlx.run_reference(a, {'x': [[1.0], [2.0, 3.0]], 'y': X}, {})",
               non_str_keys="rlx.run_reference(g, {1: I, None: I}, P)")
        + _cases("ParameterError",
                 missing_param="rlx.run_reference(g, {'i': I})",
                 wrong_param_shape="rlx.run_reference(g, {'i': I}, {'t': T.T})",
                 params_list="rlx.run_reference(g, {'i': I}, [T])")
        + _cases("GraphError", not_a_graph="rlx.run_reference('g', {'i': I}, P)")
        + _cases(OK, nan="assert np.isnan(rlx.run_reference(a, {'x': X * np.nan, 'y': X})['z']).all()"),
        setup=_RUN_SETUP)


# ---------------------------------------------------------------- rlx.models

@pytest.fixture
def bert():
    """tests/models/test_bert.py, for its tiny random BERT folder builder."""
    return pytest.importorskip("models.test_bert", reason="needs safetensors and tokenizers")


def _bad_folders(bert, root: Path) -> dict[str, Path]:
    """One tiny BERT folder per kind of damage (tests/models/test_bert.py's builder)."""
    from safetensors.numpy import save_file

    def fresh(name: str, **overrides) -> Path:
        return bert.make_tiny_bert(root / name, **overrides)

    out = {"good": fresh("good")}
    (root / "afile").write_text("x")
    out["afile"] = root / "afile"
    f = out["no_config"] = fresh("no_config")
    (f / "config.json").unlink()
    for name, text in (("garbage_config", "{not json"), ("config_list", "[1, 2]"), ("config_null", "null"),
                       ("config_binary", None)):
        f = out[name] = fresh(name)
        if text is None:
            (f / "config.json").write_bytes(b"\xff\xfe\x00garbage")
        else:
            (f / "config.json").write_text(text)
    f = out["no_weights"] = fresh("no_weights")
    (f / "model.safetensors").unlink()
    f = out["truncated_weights"] = fresh("truncated_weights")
    data = (f / "model.safetensors").read_bytes()
    (f / "model.safetensors").write_bytes(data[: len(data) // 3])
    f = out["garbage_weights"] = fresh("garbage_weights")
    (f / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}..")
    f = out["empty_weights"] = fresh("empty_weights")
    (f / "model.safetensors").write_bytes(b"")
    f = out["wrong_shape"] = fresh("wrong_shape")
    w = bert._tiny_weights(bert.TINY)
    w["encoder.layer.0.output.dense.weight"] = np.zeros((32, 63), np.float32)
    save_file(w, str(f / "model.safetensors"))
    f = out["bad_tokenizer"] = fresh("bad_tokenizer")
    (f / "tokenizer.json").write_text('{"version": "1.0", "model": 7}')
    f = out["no_tokenizer"] = fresh("no_tokenizer")
    (f / "tokenizer.json").unlink()
    (f / "vocab.txt").unlink()
    # The tokenizer has 25 tokens; the table (and config.json) only 20 rows.
    small = bert.TINY["vocab_size"] - 5
    f = out["tokenizer_larger"] = fresh("tokenizer_larger", vocab_size=small)
    # config.json says 40 rows, the table has 25.
    f = out["config_disagrees"] = fresh("config_disagrees")
    cfg = json.loads((f / "config.json").read_text())
    (f / "config.json").write_text(json.dumps(dict(cfg, vocab_size=40)))
    out["pad_out_of_range"] = fresh("pad_out_of_range", pad_token_id=bert.TINY["vocab_size"])
    return out


def test_load_embedder(bert, tmp_path):
    folders = _bad_folders(bert, tmp_path)
    n_tok, rows = bert.TINY["vocab_size"], bert.TINY["vocab_size"] - 5

    def load(label: str, expect: str, match: str = "", **kw: object) -> Case:
        args = "".join(f", {k}={v!r}" for k, v in kw.items())
        return Case(label, f"rlx.models.load_embedder({str(folders.get(label, tmp_path / label))!r}{args})",
                    expect, match)

    run_group([
        load("missing_folder", "ModelLoadError", "does not exist"),
        load("afile", "ModelLoadError", "not a folder"),
        load("no_config", "ModelLoadError", "config.json: file not found"),
        load("garbage_config", "ModelLoadError", "config.json"),
        load("config_list", "ModelLoadError", "config.json"),
        load("config_null", "ModelLoadError", "config.json"),
        load("config_binary", "ModelLoadError", "config.json"),
        load("no_weights", "ModelLoadError", "model.safetensors"),
        load("truncated_weights", "ModelLoadError", "model.safetensors"),
        load("garbage_weights", "ModelLoadError", "model.safetensors"),
        load("empty_weights", "ModelLoadError", "model.safetensors"),
        load("wrong_shape", "ModelLoadError", "has shape (32, 63)"),
        load("bad_tokenizer", "ModelLoadError", "tokenizer.json"),
        load("no_tokenizer", "ModelLoadError", "tokenizer.json"),
        load("tokenizer_larger", "ModelLoadError", f"has {n_tok} tokens, but the embedding table"),
        load("config_disagrees", "ModelLoadError", f"has shape ({n_tok}, 32), expected (40, 32)"),
        load("pad_out_of_range", "ModelLoadError", "pad_token_id"),
        Case("name_not_str", "rlx.models.load_embedder(5)", "ModelLoadError", "got a int"),
        Case("bad_precision", f"rlx.models.load_embedder({str(folders['good'])!r}, precision='f64')",
             "ConfigError", "precision"),
        Case("bad_device", f"rlx.models.load_embedder({str(folders['good'])!r}, device='tpu')",
             "ConfigError", "tpu"),
        Case("bad_cache_size", f"rlx.models.load_embedder({str(folders['good'])!r}, cache_size=0)",
             "ConfigError", "cache_size"),
    ])
    assert f"{rows} rows" in _message_of(folders["tokenizer_larger"])


def _message_of(folder: Path) -> str:
    """The load error for ``folder``, raised in this process (no crash risk: the group above ran it)."""
    with pytest.raises(rlx.ModelLoadError) as info:
        rlx.models.load_embedder(folder)
    assert str(folder / "tokenizer.json") in str(info.value)
    return str(info.value)


def test_encode(bert, tmp_path):
    folder = bert.make_tiny_bert(tmp_path / "tiny")   # max_seq_length 24 (sentence_bert_config.json)
    dim = bert.TINY["hidden_size"]
    run_group(
        _cases("InputError",
               none="m.encode(None)",
               an_int="m.encode(5)",
               int_items="m.encode([1, 2])",
               none_item="m.encode(['a', None])",
               nested="m.encode(['a', ['b']])",
               bytes_text="m.encode(b'hello')",
               bytes_item="m.encode([b'hello'])")
        + _cases("ConfigError",
                 batch_zero="m.encode(['a'], batch_size=0)",
                 batch_float="m.encode(['a'], batch_size=2.5)",
                 batch_str="m.encode(['a'], batch_size='3')")
        + _cases(OK,
                 empty_list=f"assert m.encode([]).shape == (0, {dim})",
                 empty_string=f"assert m.encode('').shape == ({dim},)",
                 tuple_and_generator=f"assert m.encode(t for t in ('a', 'b')).shape == (2, {dim})",
                 # Documented: truncated to the model's maximum, with a UserWarning.
                 too_long=f"""
                     with warnings.catch_warnings(record=True) as w:
                         warnings.simplefilter('always')
                         e = m.encode(['hello world ' * 500, 'a'])
                     assert e.shape == (2, {dim}) and np.isfinite(e).all()
                     assert any('truncated' in str(x.message) for x in w)"""),
        setup=f"m = rlx.models.load_embedder({str(folder)!r})",
        after=f"assert m.encode(['hello world']).shape == (1, {dim})")


# ---------------------------------------------------------------- the harness itself


def test_harness_reports_a_crash():
    """A case that kills its process fails the group and names the case."""
    with pytest.raises(AssertionError, match="during case 'abort'"):
        run_group([Case("fine", "pass", OK), Case("abort", "import os; os.abort()", OK)])
