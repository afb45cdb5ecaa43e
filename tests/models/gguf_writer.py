"""Small GGUF files for the model tests: metadata by Python type (str
lists as string arrays, float / int lists as FLOAT32 / INT32 arrays, bool,
int as uint32, float as float32, str) and optional tensors (numpy arrays
as they are; ``quantize`` names tensors written in a GGML block format,
quantized by the gguf package), written with gguf's own GGUFWriter."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def write_gguf(path: Path, arch: str, metadata: Mapping[str, Any],
               tensors: Mapping[str, np.ndarray] | None = None, quantize: Mapping[str, str] | None = None) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    for key, value in metadata.items():
        if key == "general.architecture":
            continue   # the writer adds it from arch
        if isinstance(value, list) and value and isinstance(value[0], str):
            w.add_array(key, value)
        elif isinstance(value, list):
            vtype = gguf.GGUFValueType.FLOAT32 if isinstance(value[0], float) else gguf.GGUFValueType.INT32
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=vtype)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_string(key, value)
    for name, array in (tensors or {}).items():
        qtype = (quantize or {}).get(name)
        if qtype is None:
            w.add_tensor(name, array)
        else:
            kind = gguf.GGMLQuantizationType[qtype.upper()]
            w.add_tensor(name, gguf.quants.quantize(array, kind), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def changed_metadata(md: dict[str, Any], arch: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """md with ``changes`` applied (a value of None deletes the key): keys under "general." or
    "tokenizer." as given, others under "<arch>." with "__" for each dot (attention__head_count)."""
    for key, value in changes.items():
        full = key if key.startswith(("general.", "tokenizer.")) else f"{arch}." + key.replace("__", ".")
        if value is None:
            md.pop(full, None)
        else:
            md[full] = value
    return md
