"""rlx.safetensors: the reader and writer against the safetensors package
(its torch form, which holds FP8 and BF16), every dtype, and the errors a
broken file raises."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest

from rlx.errors import ModelLoadError
from rlx.safetensors import load_safetensors, save_safetensors


def _tensors(rng) -> dict[str, np.ndarray]:
    x = rng.standard_normal((5, 7)) * 10
    return {"f64": x, "f32": x.astype(np.float32), "f16": x.astype(np.float16),
            "bf16": x.astype(ml_dtypes.bfloat16), "e4m3": x.astype(ml_dtypes.float8_e4m3fn),
            "e5m2": x.astype(ml_dtypes.float8_e5m2), "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
            "i32": np.arange(3, dtype=np.int32), "i16": np.arange(4, dtype=np.int16),
            "i8": np.arange(-2, 2, dtype=np.int8),
            "u8": np.arange(9, dtype=np.uint8), "bool": np.array([True, False]), "scalar": np.array(3.5, np.float32),
            "empty": np.zeros((0, 4), np.float32)}


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def test_round_trip_every_dtype(tmp_path, rng):
    want = _tensors(rng)
    save_safetensors(tmp_path / "t.safetensors", want, metadata={"format": "pt"})
    got = load_safetensors(tmp_path / "t.safetensors")
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert _bits(got[name]) == _bits(value), name
    only = load_safetensors(tmp_path / "t.safetensors", names=["e4m3"])
    assert list(only) == ["e4m3"]


def test_matches_the_safetensors_package(tmp_path, rng):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    x = torch.from_numpy(rng.standard_normal((6, 9)).astype(np.float32))
    theirs = {"w": x.to(torch.float8_e4m3fn), "v": x.to(torch.float8_e5m2), "b": x.to(torch.bfloat16),
              "s": torch.ones(6, 1), "h": x.half()}
    st.save_file(theirs, str(tmp_path / "theirs.safetensors"))
    got = load_safetensors(tmp_path / "theirs.safetensors")
    for name, t in theirs.items():
        assert got[name].shape == tuple(t.shape)
        assert _bits(got[name]) == t.contiguous().view(torch.uint8).numpy().tobytes(), name
    save_safetensors(tmp_path / "ours.safetensors", got)
    back = st.load_file(str(tmp_path / "ours.safetensors"))
    for name, t in theirs.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name].view(torch.uint8), t.view(torch.uint8)), name


def test_broken_files(tmp_path, rng):
    path = tmp_path / "t.safetensors"
    save_safetensors(path, {"a": np.ones((4, 4), np.float32)})
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_safetensors(path)
    path.write_bytes(b"\x01\x02")
    with pytest.raises(ModelLoadError, match="8-byte header"):
        load_safetensors(path)
    path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ModelLoadError, match="header length"):
        load_safetensors(path)
    header = json.dumps({"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00")
    with pytest.raises(ModelLoadError, match="dtype 'F4'"):
        load_safetensors(path)
    with pytest.raises(ModelLoadError, match="no tensor"):
        save_safetensors(path, {"a": np.ones(2, np.float32)}) or load_safetensors(path, names=["b"])
    with pytest.raises(ModelLoadError, match="cannot read"):
        load_safetensors(tmp_path / "missing.safetensors")
    with pytest.raises(ModelLoadError, match="cannot hold"):
        save_safetensors(path, {"c": np.ones(2, np.complex64)})
