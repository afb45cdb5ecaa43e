"""GGUF block formats for the tests of shaders/quant.h: the format list, valid
random blocks, and the gguf package's dequantization as the oracle.

random_blocks fills every block with random bytes, then writes each scale
field as a finite value of moderate size: f16 scales are +-2^u, u uniform in
[-8, -2] (rounded to f16; the sign is random, which every decoder handles),
MXFP4's E8M0 byte is 2^(e - 128) for e in [118, 130], BF16 values are
normal-distributed floats truncated to bf16. Everything else (quants, grid
indices, signs, 6-bit sub-scales, NVFP4's E4M3 scale bytes, whose every byte
is a finite scale) stays random, so all codes are exercised."""

from __future__ import annotations

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

FORMATS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq1_s", "iq1_m",
           "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4", "nvfp4",
           "bf16"]

# Byte offsets of each block's f16 scale fields.
_F16_FIELDS = {
    "q4_0": (0,), "q4_1": (0, 2), "q5_0": (0,), "q5_1": (0, 2), "q8_0": (0,),
    "q2_k": (80, 82), "q3_k": (108,), "q4_k": (0, 2), "q5_k": (0, 2), "q6_k": (208,),
    "iq1_s": (0,), "iq2_xxs": (0,), "iq2_xs": (0,), "iq2_s": (0,), "iq3_xxs": (0,), "iq3_s": (0,),
    "iq4_nl": (0,), "iq4_xs": (0,), "tq1_0": (52,), "tq2_0": (64,),
}


def qtype(fmt: str) -> GGMLQuantizationType:
    return GGMLQuantizationType[fmt.upper()]


def block_size(fmt: str) -> tuple[int, int]:
    """(elements, bytes) of one block."""
    return GGML_QUANT_SIZES[qtype(fmt)]


def _f16_scales(rng, count: int) -> np.ndarray:
    mag = np.exp2(rng.uniform(-8.0, -2.0, count))
    sign = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def random_blocks(fmt: str, rows: int, k: int, rng) -> np.ndarray:
    """uint8 [rows, k // BLOCK * BYTES]: random valid blocks of the format."""
    elems, nbytes = block_size(fmt)
    assert k % elems == 0, (fmt, k)
    nblk = rows * (k // elems)
    if fmt == "bf16":
        vals = rng.standard_normal(nblk).astype(np.float32)
        data = (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        return data.reshape(rows, -1).copy()
    data = rng.integers(0, 256, (nblk, nbytes), dtype=np.uint8)
    for off in _F16_FIELDS.get(fmt, ()):
        data[:, off:off + 2] = _f16_scales(rng, nblk).view(np.uint8).reshape(nblk, 2)
    if fmt == "iq1_m":
        # The f16 scale is the top nibble of each of the four u16 at byte 48.
        bits = _f16_scales(rng, nblk).view(np.uint16).astype(np.uint16)
        words = data[:, 48:56].copy().view(np.uint16)          # (nblk, 4)
        for i in range(4):
            words[:, i] = (words[:, i] & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
        data[:, 48:56] = words.view(np.uint8)
    elif fmt == "mxfp4":
        data[:, 0] = rng.integers(118, 131, nblk, dtype=np.uint8)
    return data.reshape(rows, -1)


def dequantize_reference(fmt: str, data: np.ndarray, rows: int, k: int) -> np.ndarray:
    """float32 [rows, k]: gguf.quants.dequantize of the blocks."""
    out = dequantize(np.ascontiguousarray(data, np.uint8).reshape(rows, -1), qtype(fmt))
    return np.asarray(out, np.float32).reshape(rows, k)


def whole_blocks(fmt: str, k: int) -> int:
    """k rounded up to whole blocks of the format (a K-quant row of 640 -> 768)."""
    block = block_size(fmt)[0]
    return -(-k // block) * block


def large_weight(fmt: str, rows: int, k: int, seed: int = 0) -> np.ndarray:
    """A benchmark-sized weight: up to 4096 random valid rows, tiled to ``rows``
    (speed does not depend on the values; generating 262144 rows would)."""
    pattern = random_blocks(fmt, min(rows, 4096), k, np.random.default_rng(seed))
    return np.ascontiguousarray(np.resize(pattern, (rows, pattern.shape[1])))
