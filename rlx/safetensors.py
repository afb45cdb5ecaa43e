"""safetensors files as typed numpy arrays, FP8 included.

``safetensors.numpy`` has no FP8 dtypes (it looks for ``numpy.float8_*``,
which numpy lacks), and FP8 checkpoints (``F8_E4M3`` weights beside
``weight_scale`` tensors) are what this module is for, so rlx reads the
format itself: an 8-byte little-endian header length, a JSON header of
``{name: {"dtype", "shape", "data_offsets": [begin, end]}}`` (offsets from
the end of the header; an optional ``__metadata__`` entry of strings), then
the raw little-endian bytes. The file is memory-mapped and each tensor is a
read-only view of it.

dtypes: F64, F32, F16, I64, I32, I16, I8, U8, BOOL as numpy's; F8_E4M3 and
F8_E5M2 as ``ml_dtypes.float8_e4m3fn`` / ``float8_e5m2`` (rlx's f8e4m3 and
f8e5m2); BF16 as ``ml_dtypes.bfloat16``.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

from rlx.errors import ModelLoadError

__all__ = ["load_safetensors", "save_safetensors"]

_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20   # the format's own limit
_BROKEN = "the file is corrupt, truncated or not a safetensors file"


def load_safetensors(path: str | os.PathLike[str], names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """name -> read-only array (a view of the memory-mapped file) of every
    tensor in the file, or of ``names`` only. Raises ModelLoadError for a
    missing, truncated or malformed file and unknown dtypes."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelLoadError(f"{path}: shorter than its 8-byte header length: {_BROKEN}")
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                raise ModelLoadError(f"{path}: header length {n} exceeds the file ({size} bytes): {_BROKEN}")
            header = json.loads(f.read(n))
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: the header is not JSON ({e}): {_BROKEN}") from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path}: the header is not a JSON object: {_BROKEN}")
    header.pop("__metadata__", None)
    wanted = list(header) if names is None else list(names)
    missing = [w for w in wanted if w not in header]
    if missing:
        raise ModelLoadError(f"{path}: no tensor(s) {missing}; the file holds {sorted(header)[:8]}...")
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n, shape=(size - 8 - n,)) if size > 8 + n \
        else np.zeros(0, np.uint8)
    out: dict[str, np.ndarray] = {}
    for name in wanted:
        entry = header[name]
        try:
            dtype = _DTYPES[entry["dtype"]]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(o) for o in entry["data_offsets"])
        except KeyError as e:
            if isinstance(entry, dict) and "dtype" in entry and entry["dtype"] not in _DTYPES:
                raise ModelLoadError(f"{path}: tensor {name!r} has dtype {entry['dtype']!r}; known: "
                                     f"{', '.join(_DTYPES)}") from None
            raise ModelLoadError(f"{path}: tensor {name!r}: header entry lacks {e}") from None
        except (TypeError, ValueError):
            raise ModelLoadError(f"{path}: tensor {name!r}: malformed header entry {entry!r}") from None
        want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if begin < 0 or end - begin != want or end > data.size:
            raise ModelLoadError(f"{path}: tensor {name!r} ({entry['dtype']}{list(shape)}) spans bytes "
                                 f"[{begin}, {end}) of a {data.size}-byte data section: {_BROKEN}")
        out[name] = np.asarray(data[begin:end]).view(dtype).reshape(shape)   # a plain array over the map
    return out


def save_safetensors(path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray],
                     metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (numpy arrays of the dtypes above, FP8 included) as a
    safetensors file, in name order; written to a temporary file and renamed,
    so a failed write leaves no half file."""
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    arrays, offset = [], 0
    for name in sorted(tensors):
        arr = np.require(np.asarray(tensors[name]), requirements="C")   # keeps 0-d (ascontiguousarray would not)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        if dtype not in _NAMES:
            raise ModelLoadError(f"save_safetensors: tensor {name!r} has dtype {arr.dtype}, which safetensors "
                                 f"cannot hold")
        arr = arr.astype(dtype, copy=False)
        header[name] = {"dtype": _NAMES[dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        arrays.append(arr)
        offset += arr.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)   # 8-byte alignment of the data, as the reference writer pads
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for arr in arrays:
            f.write(arr.tobytes())
    os.replace(tmp, path)
