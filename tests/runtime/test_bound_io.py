"""Inputs read and outputs written in the caller's arrays (RLX_BIND_IO, the
CPU): the same results as copying through the arena, the caller's input
left as it was, fallbacks (misaligned arrays, an output over an input, one
storage behind two IO entries), the arena's own bytes restored after a run,
concurrent runs, and no kernel reading or writing past an array's end
(arrays that end on a guard page, in a subprocess that would catch the
crash)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import rlx
from rlx.runtime.compiler import BIND_MIN_BYTES


def _fft_exe(shape=(37, 400)):
    g = rlx.Graph()
    x = g.input("x", shape, "c64")
    g.set_outputs(y=g.fft(x))
    return rlx.compile(g, device="cpu")   # the host shim wraps memory; the GPU shims copy (test below)


def _bound_here(exe, bound):
    """What a run binds in place: ``bound`` on the CPU; nothing where the
    suite runs on a GPU (--rlx-device sends device="cpu" compiles there)."""
    return bound if exe.device.backend == "host" else ([], [])


def _signal(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


def test_large_io_is_bound_and_matches_the_copying_run():
    exe = _fft_exe()
    assert exe.program.bound_io == _bound_here(exe, ([0], [0]))
    x = _signal((37, 400))
    before = x.copy()
    got = exe.run(x=x)["y"]
    np.testing.assert_array_equal(x, before), "the caller's input is read, never written"
    with exe.copying_io():
        assert not exe.program.binds_io
        copied = exe.run(x=x)["y"]
    assert exe.program.binds_io
    np.testing.assert_array_equal(got, copied)
    _close(got, np.fft.fft(x.astype(np.complex128)))
    again = exe.run(x=_signal((37, 400), 1))["y"]
    assert not np.shares_memory(got, again)
    np.testing.assert_array_equal(got, copied), "a later run leaves an earlier result alone"


def test_env_switch_and_small_values_copy(monkeypatch):
    monkeypatch.setenv("RLX_BIND_IO", "0")
    assert _fft_exe().program.bound_io == ([], [])
    monkeypatch.delenv("RLX_BIND_IO")
    g = rlx.Graph()
    n = BIND_MIN_BYTES // 4 - 1   # under the threshold: copied
    a = g.input("a", (n,), "f32")
    g.set_outputs(y=g.relu(a))
    exe = rlx.compile(g, device="cpu")
    assert exe.program.bound_io == ([], [])
    x = np.linspace(-1, 1, n).astype(np.float32)
    np.testing.assert_array_equal(exe.run(a=x)["y"], np.maximum(x, 0))


def test_misaligned_arrays_and_an_output_over_its_input_fall_back_to_copies():
    exe = _fft_exe((8, 256))
    x = _signal((8, 256))
    want = exe.run(x=x)["y"]
    raw = np.zeros(x.nbytes + 8, np.uint8)
    odd = np.frombuffer(raw.data, np.complex64, x.size, offset=4).reshape(x.shape)   # 4-byte aligned only
    odd[...] = x
    np.testing.assert_array_equal(exe.run(x=odd)["y"], want)
    out = np.frombuffer(np.zeros(x.nbytes + 8, np.uint8).data, np.complex64, x.size, offset=4).reshape(x.shape)
    exe.program.run([x], [out])
    np.testing.assert_array_equal(out, want)
    inplace = x.copy()   # the output is the input: the kernels must not overwrite what they still read
    exe.program.run([inplace], [inplace])
    np.testing.assert_array_equal(inplace, want)


def test_one_storage_behind_several_io_entries_is_copied():
    g = rlx.Graph()
    a = g.input("a", (64, 64), "f32")
    b = g.relu(a)
    g.set_outputs(same=a, flat=g.reshape(a, (4096,)), r1=b, r2=b)
    exe = rlx.compile(g, device="cpu")
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    out = exe.run(a=x)
    np.testing.assert_array_equal(out["same"], x)
    np.testing.assert_array_equal(out["flat"], x.reshape(-1))
    np.testing.assert_array_equal(out["r1"], np.maximum(x, 0))
    np.testing.assert_array_equal(out["r2"], np.maximum(x, 0))
    assert not np.shares_memory(out["same"], x)


def test_matmul_graph_with_bound_inputs_matches_reference():
    rng = np.random.default_rng(3)
    g = rlx.Graph()
    a = g.input("a", (33, 129), "f32")
    w = g.input("w", (129, 65), "f32")
    g.set_outputs(y=g.softmax(g.matmul(a, w), axis=-1))
    exe = rlx.compile(g, device="cpu")
    assert exe.program.bound_io[0] == _bound_here(exe, ([0, 1], []))[0], "the inputs are large enough to bind"
    av, wv = rng.standard_normal((33, 129)).astype(np.float32), rng.standard_normal((129, 65)).astype(np.float32)
    logits = av.astype(np.float64) @ wv.astype(np.float64)
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(exe.run(a=av, w=wv)["y"], want, rtol=1e-4, atol=1e-6)


def test_arena_bytes_restored_after_a_run():
    exe = _fft_exe((8, 512))
    x = _signal((8, 512))
    exe.run(x=x)
    del x   # the caller's array is gone: nothing may still point at it
    for i in range(exe.program.thunk_count):
        exe.program.run_one(i)   # over the arena's own bytes
    x = _signal((8, 512), 4)
    with exe.copying_io():
        want = exe.run(x=x)["y"]
    np.testing.assert_array_equal(exe.run(x=x)["y"], want)


def test_concurrent_runs_each_get_their_own_result():
    exe = _fft_exe((16, 256))
    inputs = [_signal((16, 256), s) for s in range(4)]
    wants = [np.fft.fft(x.astype(np.complex128)) for x in inputs]
    errors = []

    def worker(k):
        try:
            for _ in range(15):
                _close(exe.run(x=inputs[k])["y"], wants[k])
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


GUARD_PAGE_SCRIPT = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    import rlx

    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    keep = []

    def at_page_end(shape, dtype):
        # An array whose last byte is the last before a PROT_NONE page.
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        pages = -(-nbytes // PAGE) + 1
        m = mmap.mmap(-1, pages * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        assert libc.mprotect(base + (pages - 1) * PAGE, PAGE, 0) == 0
        keep.append(m)
        start = (pages - 1) * PAGE - nbytes
        assert start % 16 == 0, "keep the shapes 16-byte multiples: bound arrays need that alignment"
        return np.frombuffer(m, dtype, int(np.prod(shape)), start).reshape(shape)

    rng = np.random.default_rng(0)
    cases = []
    def case(name, build, feeds):
        cases.append((name, build, feeds))

    def g1(g):
        a = g.input("a", (40, 100), "f32"); b = g.input("b", (40, 100), "f32")
        return {"y": g.add(g.mul(a, b), g.exp(a))}
    case("elementwise", g1, {"a": ((40, 100), np.float32), "b": ((40, 100), np.float32)})
    def g2(g):
        a = g.input("a", (36, 124), "f32"); w = g.input("w", (124, 68), "f32")
        return {"y": g.matmul(a, w)}
    case("matmul", g2, {"a": ((36, 124), np.float32), "w": ((124, 68), np.float32)})
    def g3(g):
        a = g.input("a", (48, 200), "f32"); w = g.input("w", (200,), "f32"); b = g.input("b", (200,), "f32")
        return {"s": g.softmax(a, axis=-1), "n": g.layernorm(a, w, b), "r": g.sum(a, axis=-1)}
    case("softmax/layernorm/sum", g3, {"a": ((48, 200), np.float32), "w": ((200,), np.float32),
                                       "b": ((200,), np.float32)})
    def g4(g):
        a = g.input("a", (12, 400), "f32")
        return {"y": g.rfft(a)}
    case("rfft", g4, {"a": ((12, 400), np.float32)})
    def g5(g):
        a = g.input("a", (6, 1000), "c64")
        return {"y": g.fft(a)}
    case("fft mixed radix", g5, {"a": ((6, 1000), np.complex64)})
    def g6(g):
        a = g.input("a", (64, 96), "f16")
        return {"y": g.gelu(a), "t": g.transpose(a, (1, 0))}
    case("f16 elementwise and a transpose", g6, {"a": ((64, 96), np.float16)})

    for name, build, feeds in cases:
        g = rlx.Graph()
        outs = build(g)
        g.set_outputs(**outs)
        exe = rlx.compile(g, device="cpu")
        assert exe.program.bound_io[0], name
        arrays = {}
        for k, (shape, dt) in feeds.items():
            arr = at_page_end(shape, dt)
            arr[...] = rng.standard_normal(shape).astype(dt)
            arrays[k] = arr
        with exe.copying_io():
            want = exe.run(**arrays)
        outputs = [at_page_end(spec.shape, spec.dtype.numpy) for spec in exe.output_specs]
        exe.program.run([arrays[s.name] for s in exe.input_specs], outputs)
        for spec, out in zip(exe.output_specs, outputs):
            np.testing.assert_array_equal(out, want[spec.name], err_msg=name)
        print("ok", name)
    print("all ok")
""")


def test_no_kernel_reads_or_writes_past_a_bound_array():
    proc = subprocess.run([sys.executable, "-c", GUARD_PAGE_SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "all ok" in proc.stdout, (
        f"rc {proc.returncode} (negative: killed by a signal, e.g. a read past an array's end)\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


@pytest.mark.parametrize("backend", ["cuda", "metal"])
def test_gpu_shims_do_not_wrap(backend):
    from rlx.runtime import shim

    try:
        dev = shim.open_device(backend)
    except rlx.RlxError as exc:
        pytest.skip(f"{backend}: {exc}")
    assert not dev.can_wrap
    g = rlx.Graph()
    x = g.input("x", (64, 256), "f32")
    g.set_outputs(y=g.relu(x))
    exe = rlx.compile(g, device=backend)
    assert exe.program.bound_io == ([], []), "a GPU run copies its inputs and outputs"
    value = np.linspace(-1, 1, 64 * 256, dtype=np.float32).reshape(64, 256)
    np.testing.assert_array_equal(exe.run(x=value)["y"], np.maximum(value, 0))
