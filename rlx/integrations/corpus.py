"""A text corpus cut into fixed-size row blocks, and the output folder that
records which blocks are embedded (``rlx embed --ray``).

A corpus is a Parquet file or a JSONL file (one JSON object a line, blank
lines skipped) with a string column of texts. It is cut into blocks of
``block_rows`` rows; block i holds rows [i * block_rows, (i + 1) * block_rows).
Each block's embeddings go to their own Parquet part, ``part-NNNNNN.parquet``,
written to a temporary name and renamed, so a part that exists is complete.
``manifest.json`` beside the parts fingerprints the input and the settings;
a rerun with the same fingerprint skips the blocks whose part exists.

Everything here checks its input before any work starts and reads one block
at a time, so the driver never holds the corpus in memory. pyarrow is needed
for Parquet (the ``ray`` extra brings it).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlx.arg_types import is_integer
from rlx.atomic_file import write_atomic
from rlx.errors import ConfigError, CorpusError, ManifestMismatchError, MissingDependencyError

__all__ = ["Block", "Corpus", "open_corpus", "read_block_texts", "OutputFolder", "vectors_to_arrow",
           "arrow_to_vectors", "DEFAULT_BLOCK_ROWS", "ROW_COLUMN"]

DEFAULT_BLOCK_ROWS = 4096
ROW_COLUMN = "row"
# "_" first: Parquet readers (pyarrow, Ray, Spark) skip it when reading the folder as a dataset.
MANIFEST = "_manifest.json"
MANIFEST_FORMAT = "rlx-embed-parts/1"


def require_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependencyError("reading and writing Parquet needs pyarrow (pip install 'rlx[ray]')") from None
    return pyarrow


@dataclass(frozen=True)
class Block:
    """Rows [start, stop) of the corpus; for JSONL also the bytes that hold them."""

    index: int
    start: int
    stop: int
    byte_start: int = 0
    byte_stop: int = 0

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Corpus:
    path: Path
    format: str            # "parquet" or "jsonl"
    text_column: str
    rows: int
    block_rows: int
    blocks: tuple[Block, ...]
    size: int
    mtime_ns: int

    def fingerprint(self) -> dict:
        """What identifies the input: a changed file (size or mtime) is another input."""
        return {"path": str(self.path), "format": self.format, "size": self.size, "mtime_ns": self.mtime_ns,
                "rows": self.rows}


def _format_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".jsonl", ".ndjson", ".jsonl.txt")):
        return "jsonl"
    raise CorpusError(f"{path}: unknown corpus format (expected a .parquet or a .jsonl file)")


def open_corpus(path: str | os.PathLike, text_column: str = "text", block_rows: int = DEFAULT_BLOCK_ROWS) -> Corpus:
    """Check the corpus (readable, the text column exists and holds strings)
    and plan its blocks. Parquet: from the footer alone. JSONL: one pass over
    the bytes to find where each block starts; the first record is parsed."""
    if not is_integer(block_rows) or block_rows < 1:
        raise ConfigError(f"block_rows must be an integer >= 1, got {block_rows!r}")
    p = Path(path).expanduser().resolve()
    fmt = _format_of(p)
    try:
        st = p.stat()
    except OSError as e:
        raise CorpusError(f"{p}: cannot read the corpus ({e.strerror or e})") from None
    if not p.is_file():
        raise CorpusError(f"{p}: not a file")
    if fmt == "parquet":
        rows = _check_parquet(p, text_column)
        blocks = tuple(Block(i, s, min(s + block_rows, rows)) for i, s in enumerate(range(0, rows, block_rows)))
    else:
        rows, blocks = _scan_jsonl(p, text_column, block_rows)
    return Corpus(p, fmt, text_column, rows, block_rows, blocks, st.st_size, st.st_mtime_ns)


def _check_parquet(path: Path, text_column: str) -> int:
    pa = require_pyarrow()
    try:
        meta = pa.parquet.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise CorpusError(f"{path}: not a readable Parquet file ({e})") from None
    schema = meta.schema_arrow
    if text_column not in schema.names:
        raise CorpusError(f"{path}: no column {text_column!r} (columns: {', '.join(schema.names)}); "
                          f"choose one with --text-column")
    kind = schema.field(text_column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise CorpusError(f"{path}: column {text_column!r} holds {kind}, not strings")
    return meta.metadata.num_rows


def _scan_jsonl(path: Path, text_column: str, block_rows: int) -> tuple[int, tuple[Block, ...]]:
    starts: list[int] = []   # byte offset of every block's first record
    rows = 0
    offset = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    if rows == 0:
                        _parse_record(line, text_column, path, 0)
                    if rows % block_rows == 0:
                        starts.append(offset)
                    rows += 1
                offset += len(line)
    except OSError as e:
        raise CorpusError(f"{path}: cannot read the corpus ({e.strerror or e})") from None
    ends = starts[1:] + [offset]
    blocks = tuple(Block(i, i * block_rows, min((i + 1) * block_rows, rows), s, e)
                   for i, (s, e) in enumerate(zip(starts, ends)))
    return rows, blocks


def _parse_record(line: bytes, text_column: str, path: Path, row: int) -> str:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: record {row} is not valid JSON ({e})") from None
    if not isinstance(record, dict):
        raise CorpusError(f"{path}: record {row} is a JSON {type(record).__name__}, not an object")
    if text_column not in record:
        raise CorpusError(f"{path}: record {row} has no field {text_column!r} (fields: {', '.join(record)}); "
                          f"choose one with --text-column")
    text = record[text_column]
    if not isinstance(text, str):
        raise CorpusError(f"{path}: record {row}: {text_column!r} is a {type(text).__name__}, not a string")
    return text


def read_block_texts(path: str | os.PathLike, fmt: str, text_column: str, block: Block) -> list[str]:
    """The texts of one block, reading only the row groups (Parquet) or the
    bytes (JSONL) that hold it."""
    path = Path(path)
    if fmt == "parquet":
        pa = require_pyarrow()
        f = pa.parquet.ParquetFile(path)
        groups, first, at = [], None, 0
        for g in range(f.metadata.num_row_groups):
            n = f.metadata.row_group(g).num_rows
            if at + n > block.start and at < block.stop:
                groups.append(g)
                first = at if first is None else first
            at += n
        texts = []
        if groups:
            column = f.read_row_groups(groups, columns=[text_column]).column(text_column)
            texts = column.slice(block.start - first, block.rows).to_pylist()
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise CorpusError(f"{path}: row {block.start + i}: {text_column!r} is null")
    elif fmt == "jsonl":
        with open(path, "rb") as f:
            f.seek(block.byte_start)
            data = f.read(block.byte_stop - block.byte_start)
        lines = [line for line in data.split(b"\n") if line.strip()]
        texts = [_parse_record(line, text_column, path, block.start + i) for i, line in enumerate(lines)]
    else:
        raise CorpusError(f"{path}: unknown corpus format {fmt!r}")
    if len(texts) != block.rows:
        raise CorpusError(f"{path}: block {block.index} should hold rows {block.start}..{block.stop - 1} but "
                          f"{len(texts)} were read; the file changed after it was planned")
    return texts


def vectors_to_arrow(vectors: np.ndarray):
    """A [n, dim] matrix as an Arrow fixed_size_list<float32>[dim] column:
    a plain Parquet type that pandas, pyarrow, Spark and DuckDB read as is."""
    pa = require_pyarrow()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def arrow_to_vectors(column) -> np.ndarray:
    """A fixed_size_list<float32>[dim] column (chunked or not) as a float32 [n, dim] matrix."""
    pa = require_pyarrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    dim = column.type.list_size
    return column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)


class OutputFolder:
    """The parts and the manifest of one ``rlx embed --ray`` run."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser().resolve()

    def part(self, index: int) -> Path:
        return self.path / f"part-{index:06d}.parquet"

    def done(self, corpus: Corpus) -> set[int]:
        return {b.index for b in corpus.blocks if self.part(b.index).is_file()}

    def prepare(self, settings: dict, overwrite: bool = False) -> None:
        """Create the folder and its manifest, or check that the manifest there
        records the same settings. ``overwrite`` starts over: the parts and the
        manifest of whatever run is there are deleted first."""
        manifest = {"format": MANIFEST_FORMAT, **settings}
        path = self.path / MANIFEST
        if self.path.exists() and not self.path.is_dir():
            raise CorpusError(f"{self.path}: exists and is not a folder")
        if overwrite:
            for stale in [*self.path.glob("part-*.parquet"), *self.path.glob(".part-*.tmp"), path]:
                stale.unlink(missing_ok=True)
        if path.is_file():
            try:
                old = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                raise ManifestMismatchError(f"{path}: unreadable manifest ({e}); pass --overwrite to start over") \
                    from None
            if old != manifest:
                diff = [k for k in sorted(set(old) | set(manifest)) if old.get(k) != manifest.get(k)]
                details = "; ".join(f"{k}: {old.get(k)!r} there, {manifest.get(k)!r} now" for k in diff)
                raise ManifestMismatchError(f"{self.path} holds a different run ({details}); pass --overwrite "
                                            f"to delete its parts and start over, or choose another --output")
            return
        if self.path.is_dir() and any(self.path.glob("part-*.parquet")):
            raise ManifestMismatchError(f"{self.path}: holds parts but no {MANIFEST}; pass --overwrite to "
                                        f"start over")
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(manifest, indent=2) + "\n").encode())

    def write_part(self, index: int, rows: np.ndarray, vectors: np.ndarray, vector_column: str) -> Path:
        """One block's rows and vectors as its Parquet part, atomically."""
        pa = require_pyarrow()
        table = pa.table({ROW_COLUMN: pa.array(rows, pa.int64()), vector_column: vectors_to_arrow(vectors)})
        final = self.part(index)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        try:
            pa.parquet.write_table(table, tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return final
