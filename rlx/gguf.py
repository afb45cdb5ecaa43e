"""GGUF files (llama.cpp's model format): metadata and memory-mapped tensors.

``rlx.gguf.open(path)`` maps the file and parses it with the ``gguf``
package's ``GGUFReader`` (llama.cpp's own Python reader). The reader is
subclassed, not rewritten: every read it makes is bounds-checked, counts are
checked against the bytes left before a loop starts, arrays are read in one
piece, and tensor infos are checked (type id, dimensions, block size, offset,
alignment, llama.cpp's back-to-back layout, end of file) before the reader builds its views. Any
damage raises ``rlx.errors.ModelLoadError`` naming the file and, where there
is one, the metadata key or tensor; exceptions the reader raises itself are
translated the same way. No tensor byte is copied until a caller asks:
``GGUFTensor.data`` is a read-only slice of the map, ``numpy()`` a typed view,
``dequantize()`` a new float32 array computed by ``gguf.quants``.

    with rlx.gguf.open("model.gguf") as f:
        f.architecture                      # "gemma3"
        f.metadata["gemma3.block_count"]    # 18
        w = f.tensors["blk.0.attn_q.weight"]
        w.type, w.shape, w.nbytes           # "Q5_0", (1024, 640), 450560
        w.dequantize()                      # float32 (1024, 640)
"""

from __future__ import annotations

import builtins
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np
from gguf import quants as _quants
from gguf.constants import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType
from gguf.gguf_reader import READER_SUPPORTED_VERSIONS, GGUFReader

from rlx.errors import DTypeError, ModelLoadError
from rlx.ir.dtype import DType, quantized

__all__ = ["GGUFFile", "GGUFTensor", "open"]

_HEADER_BYTES = 24           # magic u32, version u32, tensor count u64, kv count u64
_MAX_DIMS = 4                # GGML_MAX_DIMS: llama.cpp refuses tensors with more dimensions
_MIN_KV_BYTES = 8 + 4 + 1    # key length, value type, the smallest value (a u8 or bool)
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8   # name length, n_dims, type, offset (name empty, no dims)

# Types with a numpy dtype: numpy() returns a view of these (GGUF data is little-endian).
_NUMPY_DTYPES = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
    "I8": np.dtype("i1"), "I16": np.dtype("<i2"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
}
_TYPE_IDS = {int(t) for t in GGMLQuantizationType}


def _lossy(raw: bytes, limit: int = 80) -> str:
    """A key or tensor name for an error message, readable even when it is not UTF-8."""
    text = raw[:limit].decode("utf-8", errors="replace")
    return text + ("..." if len(raw) > limit else "")


class _CheckedReader(GGUFReader):
    """``GGUFReader`` with bounds and consistency checks where it is silent.

    The overridden methods are the reader's own internal steps (gguf 0.19):
    each override checks, then hands over to the reader's version, except
    arrays, which are read here in one piece (the reader makes one numpy
    view per element: seconds for a 262,144-token vocabulary, and unbounded
    for a damaged length). Arrays of arrays are refused, as llama.cpp does.
    Metadata values are decoded to Python values as they are read, into
    ``values``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._where = "the header"
        self._phase = "header"
        self._key = ""
        self.values: dict[str, Any] = {}
        self.infos: list[dict[str, Any]] = []
        self._tensor_names: set[str] = set()
        super().__init__(path, mode="r")

    # -- errors ----------------------------------------------------------------------------------------------------

    def damage(self, what: str) -> ModelLoadError:
        return ModelLoadError(f"{self._path}: {self._where}: {what}")

    @property
    def size(self) -> int:
        return int(self.data.shape[0])

    # -- every read ------------------------------------------------------------------------------------------------

    def _get(self, offset, dtype, count=1, override_order=None):
        offset, count = int(offset), int(count)
        end = offset + np.dtype(dtype).itemsize * count
        if offset < 0 or count < 0 or end > self.size:
            raise self.damage(f"truncated: needs bytes {offset}..{end} but the file is {self.size} bytes")
        return super()._get(offset, dtype, count, override_order)

    def _get_str(self, offset):
        slen, data = super()._get_str(offset)
        if self._phase == "metadata" and self._key is None:     # the key of the next metadata entry
            self._key = bytes(data)
            self._where = f"metadata key {_lossy(self._key)!r}"
            self._utf8(self._key, "the key")
        elif self._phase == "tensor info" and self._key is None:  # the name of the next tensor
            self._key = bytes(data)
            self._where = f"tensor {_lossy(self._key)!r} (tensor info {len(self.infos)})"
            self._utf8(self._key, "the tensor name")
        return slen, data

    # -- metadata --------------------------------------------------------------------------------------------------

    def _build_fields(self, offs, count):
        count = int(count)
        left = self.size - offs
        if count * _MIN_KV_BYTES > left:
            raise self.damage(f"metadata count {count} is more than the {left} bytes left can hold "
                              f"(at least {_MIN_KV_BYTES} bytes each)")
        self._phase = "metadata"
        self._start_entry()
        return super()._build_fields(offs, count)

    def _start_entry(self) -> None:
        self._key = None
        self._where = f"metadata entry {len(self.values)}" + (
            f" (after key {next(reversed(self.values))!r})" if self.values else "")

    def _value_type(self, raw: int, what: str) -> GGUFValueType:
        try:
            return GGUFValueType(int(raw))
        except ValueError:
            raise self.damage(f"unknown {what} type id {int(raw)} (known: 0..{max(GGUFValueType)})") from None

    def _get_field_parts(self, orig_offs, raw_type):
        # Called once per metadata value (arrays are handled here, so never recursively).
        vtype = self._value_type(raw_type, "value")
        if vtype == GGUFValueType.ARRAY:
            size, parts, idxs, types, value = self._read_array(orig_offs)
        else:
            size, parts, idxs, types = super()._get_field_parts(orig_offs, raw_type)
            value = self._decode_scalar(vtype, parts[-1])
        self.values[self._utf8(self._key or b"", "the key")] = value
        return size, parts, idxs, types

    def _decode_scalar(self, vtype: GGUFValueType, part: np.ndarray) -> Any:
        if vtype == GGUFValueType.STRING:
            return self._utf8(bytes(part), "the string value")
        if vtype == GGUFValueType.BOOL and int(part.view(np.uint8)[0]) > 1:
            raise self.damage(f"bool value byte is {int(part.view(np.uint8)[0])}, not 0 or 1")
        return part[0].item()

    def _utf8(self, raw: bytes | memoryview, what: str) -> str:
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise self.damage(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})") from None

    def _read_array(self, offs: int):
        itype_arr = self._get(offs, np.uint32)
        itype = self._value_type(itype_arr[0], "array element")
        alen_arr = self._get(offs + 4, np.uint64)
        n, start = int(alen_arr[0]), offs + 12
        left = self.size - start
        if itype == GGUFValueType.ARRAY:
            raise self.damage("arrays of arrays are not supported")
        if itype == GGUFValueType.STRING:
            if n * 8 > left:
                raise self.damage(f"array of {n} strings is more than the {left} bytes left can hold")
            values, end = self._read_strings(start, n)
            body = self._get(start, np.uint8, end - start)
        else:
            dtype = np.dtype(self.gguf_scalar_to_np[itype])
            if n * dtype.itemsize > left:
                raise self.damage(f"array of {n} {itype.name} values ({n * dtype.itemsize} bytes) is more than "
                                  f"the {left} bytes left")
            body = self._get(start, dtype, n)
            if itype == GGUFValueType.BOOL and n and int(body.view(np.uint8).max()) > 1:
                raise self.damage("array of bools holds a byte that is not 0 or 1")
            values = body.tolist()
        return 12 + int(body.nbytes), [itype_arr, alen_arr, body], [2], [GGUFValueType.ARRAY, itype], values

    def _read_strings(self, start: int, n: int) -> tuple[list[str], int]:
        out: list[str] = []
        pos, size = start, self.size
        with memoryview(self.data) as mv:
            for i in range(n):
                if pos + 8 > size:
                    raise self.damage(f"truncated: string {i} of {n} in the array starts past the end of the file")
                (length,) = struct.unpack_from("<Q", mv, pos)
                if length > size - pos - 8:
                    raise self.damage(f"truncated: string {i} of {n} in the array is {length} bytes, past the end "
                                      f"of the file")
                out.append(self._utf8(mv[pos + 8:pos + 8 + length], f"string {i} of the array"))
                pos += 8 + length
        return out, pos

    def _push_field(self, field, skip_sum=False):
        if field.name in self.fields:
            raise self.damage("the key appears twice" if self._phase == "metadata" else
                              f"duplicate metadata key {field.name!r}")
        size = super()._push_field(field, skip_sum)
        if self._phase == "metadata":
            self._start_entry()
        return size

    # -- tensor infos ----------------------------------------------------------------------------------------------

    def _build_tensor_info(self, offs, count):
        count = int(count)
        self._phase, self._where = "tensor info", "after the metadata"
        align = self.fields.get("general.alignment")
        if align is not None:
            self._where = "metadata key 'general.alignment'"
            if align.types != [GGUFValueType.UINT32]:
                raise self.damage(f"must be a UINT32, got {'/'.join(t.name for t in align.types)}")
            a = int(align.parts[-1][0])
            if a == 0 or a & (a - 1):
                raise self.damage(f"{a} is not a power of two")
        left = self.size - offs
        if count * _MIN_TENSOR_INFO_BYTES > left:
            self._where = "the header"
            raise self.damage(f"tensor count {count} is more than the {left} bytes left can hold "
                              f"(at least {_MIN_TENSOR_INFO_BYTES} bytes each)")
        return super()._build_tensor_info(offs, count)

    def _get_tensor_info_field(self, orig_offs):
        self._key = None
        self._where = f"tensor info {len(self.infos)}"
        field = super()._get_tensor_info_field(orig_offs)
        _, _, n_dims, dims, raw_type, rel = field.parts
        name = field.name
        n_dims = int(n_dims[0])
        if n_dims > _MAX_DIMS:
            raise self.damage(f"{n_dims} dimensions (at most {_MAX_DIMS})")
        type_id = int(raw_type[0])
        if type_id not in _TYPE_IDS or GGMLQuantizationType(type_id) not in GGML_QUANT_SIZES:
            raise self.damage(f"unknown GGUF tensor type id {type_id}")
        qtype = GGMLQuantizationType(type_id)
        block, type_size = GGML_QUANT_SIZES[qtype]
        ne = [int(d) for d in dims]
        row = ne[0] if ne else 1
        if row % block:
            raise self.damage(f"row length {row} is not a multiple of the {qtype.name} block size {block}")
        n_elements = math.prod(ne)
        nbytes = n_elements // block * type_size
        if nbytes > self.size:
            raise self.damage(f"shape {tuple(reversed(ne))} of {qtype.name} needs {nbytes} bytes, more than the "
                              f"file's {self.size}")
        if name in self._tensor_names:
            raise self.damage("duplicate tensor name")
        self._tensor_names.add(name)
        self.infos.append({"name": name, "qtype": qtype, "shape": tuple(reversed(ne)), "n_elements": n_elements,
                           "nbytes": nbytes, "rel": int(rel[0])})
        return field

    # -- tensor data -----------------------------------------------------------------------------------------------

    def _build_tensors(self, start_offs, fields):
        # llama.cpp's layout rule: in file order, each tensor starts where the previous one's data, padded to
        # the alignment, ends (so no gaps, no overlaps, no reordering); llama.cpp refuses other files.
        self._phase = "tensor data"
        align = int(self.alignment)
        expected = 0
        for info in self.infos:
            self._where = f"tensor {info['name']!r}"
            rel, nbytes = info["rel"], info["nbytes"]
            if rel % align:
                raise self.damage(f"data offset {rel} is not a multiple of the alignment {align}")
            if rel < expected:
                raise self.damage(f"data offset {rel} overlaps the previous tensor's data, which ends at {expected}")
            if rel > expected:
                raise self.damage(f"data offset {rel} leaves a gap after the previous tensor's data (expected "
                                  f"{expected}: tensors are stored back to back in file order)")
            begin = start_offs + rel
            if begin + nbytes > self.size:
                raise self.damage(f"data (bytes {begin}..{begin + nbytes}) runs past the end of the file "
                                  f"({self.size} bytes)")
            info["offset"] = begin
            expected = rel + -(-nbytes // align) * align
        # Writers (llama.cpp's, gguf's) end the file with the last tensor's padded data. Anything after it is
        # read as damage: it is what a tensor count one too small leaves, and the data would be misread.
        end = start_offs + expected
        if self.size > end:
            self._where = "after the tensor data"
            raise self.damage(f"{self.size - end} more bytes after the end of the data section (byte {end}); "
                              f"is the tensor count ({len(self.infos)}) wrong?")
        self._where = "tensor data"
        super()._build_tensors(start_offs, fields)
        for info, t in zip(self.infos, self.tensors):   # the reader's own arithmetic must agree with ours
            if (t.name, int(t.n_bytes), int(t.data_offset)) != (info["name"], info["nbytes"], info["offset"]):
                self._where = f"tensor {info['name']!r}"
                raise self.damage("the gguf reader computes another size or offset for it")


class GGUFTensor:
    """One tensor of a ``GGUFFile``: its name, GGUF type, logical shape and raw bytes.

    ``shape`` is row-major (numpy order): GGUF's ``ne`` reversed, so a weight
    stored as ne = [n_in, n_out] has shape (n_out, n_in) with n_in contiguous.
    ``data`` is the raw bytes as a read-only uint8 view of the memory map,
    shape (rows, bytes_per_row) with rows = prod(shape[:-1]).
    """

    __slots__ = ("_file", "name", "type", "shape", "nbytes", "n_elements", "offset", "block_size", "type_size",
                 "_qtype")

    def __init__(self, file: GGUFFile, info: dict[str, Any]) -> None:
        self._file = file
        self.name: str = info["name"]
        self._qtype: GGMLQuantizationType = info["qtype"]
        self.type: str = self._qtype.name
        self.shape: tuple[int, ...] = info["shape"]
        self.nbytes: int = info["nbytes"]
        self.n_elements: int = info["n_elements"]
        self.offset: int = info["offset"]          # absolute byte offset in the file
        self.block_size, self.type_size = GGML_QUANT_SIZES[self._qtype]

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def dtype(self):
        """The rlx dtype to declare a param of this tensor with (``g.param(t.name,
        t.shape, t.dtype)``, then ``params={t.name: t}``): a block format, bf16,
        or f32 / f16 / i32 / i64; other plain types have none (ModelLoadError)."""
        plain = {"F32": "f32", "F16": "f16", "I32": "i32", "I64": "i64"}
        try:
            return DType.of(plain[self.type]) if self.type in plain else quantized(self.type)
        except DTypeError:
            raise ModelLoadError(f"{self._file.path}: tensor {self.name!r}: GGUF type {self.type} has no rlx "
                                 "dtype; use numpy() or dequantize()") from None

    @property
    def bytes_per_row(self) -> int:
        row = self.shape[-1] if self.shape else 1
        return row // self.block_size * self.type_size

    @property
    def data(self) -> np.ndarray:
        """The raw bytes: a read-only uint8 view (rows, bytes_per_row) of the memory map, not a copy."""
        view = self._file._bytes(self.offset, self.nbytes)
        return view.reshape(self.rows, self.bytes_per_row)

    def numpy(self) -> np.ndarray:
        """A read-only view with the tensor's dtype and shape (F32, F16, F64, I8, I16, I32, I64 only)."""
        dtype = _NUMPY_DTYPES.get(self.type)
        if dtype is None:
            kind = "block-quantized" if self.block_size > 1 else "not a numpy dtype"
            raise ModelLoadError(f"{self._file.path}: tensor {self.name!r} is {self.type} ({kind}); use dequantize()")
        return self.data.view(dtype).reshape(self.shape)

    def drop_cached_pages(self, start: int = 0, nbytes: int | None = None) -> None:
        """Drop bytes [start, start + nbytes) of this tensor (all of it by
        default) from resident memory (``GGUFFile.drop_cached_pages``):
        compile calls it as the tensor goes into a device buffer, so loading
        a model never holds the file and its device copy at once."""
        size = self.nbytes - start if nbytes is None else min(nbytes, self.nbytes - start)
        if size > 0:
            self._file.drop_cached_pages(self.offset + start, size)

    def dequantize(self) -> np.ndarray:
        """A new float32 array of the tensor's shape: ``gguf.quants.dequantize`` for block types and BF16,
        a conversion of ``numpy()`` for the plain types."""
        if self.type in _NUMPY_DTYPES:
            return self.numpy().astype(np.float32)
        if self.n_elements == 0:
            return np.zeros(self.shape, np.float32)
        try:
            out = _quants.dequantize(self.data, self._qtype)
        except NotImplementedError:
            raise ModelLoadError(f"{self._file.path}: tensor {self.name!r}: the gguf package cannot dequantize "
                                 f"{self.type}") from None
        return np.asarray(out, dtype=np.float32).reshape(self.shape)

    def __repr__(self) -> str:
        return f"GGUFTensor({self.name!r}, {self.type}, shape={self.shape}, nbytes={self.nbytes})"


class GGUFFile:
    """A parsed, memory-mapped GGUF file; see ``rlx.gguf.open``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ModelLoadError(f"expected a GGUF file path, got a {type(path).__name__}")
        self.path = Path(path)
        _check_header(self.path)
        message = None
        try:
            reader = _CheckedReader(self.path)
        except ModelLoadError as e:
            message = str(e)
        except (ValueError, IndexError, KeyError, TypeError, OverflowError, struct.error, MemoryError) as e:
            message = f"{self.path}: not a readable GGUF file ({type(e).__name__}: {e})"
            if isinstance(e, UnicodeDecodeError):
                message = f"{self.path}: a key or tensor name is not valid UTF-8 ({e.reason} at byte {e.start})"
        except OSError as e:
            message = f"{self.path}: cannot map the file ({e.strerror or e})"
        if message is not None:      # raised here, outside the handler, so nothing keeps the failed map alive
            raise ModelLoadError(message)
        self.version: int = int(reader.fields["GGUF.version"].parts[0][0])
        self.alignment: int = int(reader.alignment)
        self.data_offset: int = int(reader.data_offset)
        self.metadata: dict[str, Any] = reader.values
        self._map: np.ndarray | None = reader.data
        self.tensors: dict[str, GGUFTensor] = {info["name"]: GGUFTensor(self, info) for info in reader.infos}
        # The reader's fields and tensors are views of the map: drop them so close() can unmap it.
        del reader

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    @property
    def closed(self) -> bool:
        return self._map is None

    def _bytes(self, offset: int, nbytes: int) -> np.ndarray:
        if self._map is None:
            raise ModelLoadError(f"{self.path}: the file is closed")
        return self._map[offset:offset + nbytes].view(np.ndarray)

    def drop_cached_pages(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Tells the kernel the mapped pages of bytes [offset, offset + nbytes)
        (the whole file by default) are not needed now (after the weights
        were copied to a device): they leave this process's resident memory
        and are read from the file again if touched, so dropping a page that
        a neighbouring tensor shares costs a re-read, never data. A no-op
        where madvise is not available or the file is closed."""
        import mmap

        base = getattr(self._map, "_mmap", None) if self._map is not None else None
        if base is None or not hasattr(base, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        end = len(base) if nbytes is None else min(len(base), offset + nbytes)
        start = offset - offset % mmap.PAGESIZE   # madvise takes page-aligned starts
        if end > start:
            base.madvise(mmap.MADV_DONTNEED, start, end - start)

    def close(self) -> None:
        """Release the memory map: unmapped now, or, while arrays taken from it (``data``, ``numpy()``) are
        alive, when the last of them goes (never under their feet). ``data`` raises ModelLoadError afterwards."""
        # No explicit mmap.close(): numpy arrays over an mmap do not pin it, so closing it while a view is alive
        # would leave that view pointing at unmapped memory. Dropping the last reference unmaps it.
        self._map = None

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.tensors)} tensors, {len(self.metadata)} metadata keys"
        return f"GGUFFile({str(self.path)!r}, {self.architecture or 'no architecture'}, {state})"


def _check_header(path: Path) -> None:
    """The checks that come before mapping: a regular file, the magic, the version, byte order."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: file not found") from None
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the file ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):   # a FIFO would block the open, a directory cannot be mapped
        raise ModelLoadError(f"{path}: not a regular file")
    try:
        with builtins.open(path, "rb") as f:
            head = f.read(_HEADER_BYTES)
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the file ({e.strerror or e})") from None
    magic = struct.pack("<I", GGUF_MAGIC)
    if len(head) >= 4 and head[:4] != magic:
        raise ModelLoadError(f"{path}: not a GGUF file (magic {head[:4]!r}, expected {magic!r})")
    if len(head) >= 8:
        version = struct.unpack_from("<I", head, 4)[0]
        swapped = struct.unpack_from(">I", head, 4)[0]
        if version not in READER_SUPPORTED_VERSIONS and swapped in READER_SUPPORTED_VERSIONS:
            raise ModelLoadError(f"{path}: a big-endian GGUF file (version {swapped}); only little-endian files "
                                 "are supported")
        if version not in READER_SUPPORTED_VERSIONS:
            raise ModelLoadError(f"{path}: GGUF version {version} is not supported (supported: "
                                 f"{', '.join(map(str, READER_SUPPORTED_VERSIONS))})")
    if len(head) < _HEADER_BYTES:
        raise ModelLoadError(f"{path}: truncated header: the file is {len(head)} bytes, a GGUF header takes "
                             f"{_HEADER_BYTES}")


def open(path: str | os.PathLike[str]) -> GGUFFile:  # noqa: A001  (rlx.gguf.open, like io.open)
    """Parse and memory-map a GGUF file; every problem raises ModelLoadError naming the file."""
    return GGUFFile(path)
