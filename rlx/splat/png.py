"""A minimal PNG writer (8-bit grey, RGB or RGBA; zlib from the standard
library), so writing frames needs no imaging package."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

_COLOR_TYPES = {1: 0, 3: 2, 4: 6}   # channels -> PNG colour type


def to_uint8(img: np.ndarray) -> np.ndarray:
    """[0, 1] floats to bytes (clipped, rounded)."""
    return (np.clip(np.nan_to_num(np.asarray(img, np.float64)), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def write_png(path: str | Path, img: np.ndarray) -> None:
    """img: uint8 [H, W] (grey), [H, W, 3] (RGB) or [H, W, 4] (RGBA)."""
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[..., None]
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in _COLOR_TYPES or 0 in a.shape:
        raise ValueError(f"write_png: expected uint8 [H, W], [H, W, 3] or [H, W, 4], got {a.dtype}{list(a.shape)}")
    h, w, c = a.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), np.ascontiguousarray(a).reshape(h, w * c)], 1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, _COLOR_TYPES[c], 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    Path(path).write_bytes(png)
