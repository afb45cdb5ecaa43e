"""Sentence embeddings at cluster scale on Ray Data.

``RlxEmbedder`` is a callable class for ``ray.data.Dataset.map_batches``:
Ray starts one per actor, each loads its own embedder (``load_embedder``,
the construction ``rlx embed`` uses) on the device and precision its
constructor names, and every batch comes back with a vector column::

    ds = ray.data.read_parquet("corpus.parquet")
    ds = ds.map_batches(RlxEmbedder, fn_constructor_kwargs={"device": "cpu"},
                        compute=ray.data.ActorPoolStrategy(size=2), batch_size=256,
                        **actor_options(num_cpus=1))
    ds.write_parquet("out/")

``embed_corpus`` (``rlx embed --ray``) runs a corpus through the same class
block by block, writing one Parquet part per block so a rerun resumes
(rlx/integrations/corpus.py).

Fault tolerance is Ray's: ``actor_options`` sets ``max_restarts`` (a dead
actor is started again) and ``max_task_retries`` (the batches it held are
run again on the restarted actor). ray is imported on first use, so rlx
works without the ``ray`` extra.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rlx.arg_types import is_integer
from rlx.errors import ConfigError, InputError, MissingDependencyError, RlxError
from rlx.integrations.corpus import (
    DEFAULT_BLOCK_ROWS,
    ROW_COLUMN,
    Block,
    OutputFolder,
    arrow_to_vectors,
    open_corpus,
    read_block_texts,
    require_pyarrow,
    vectors_to_arrow,
)

__all__ = ["RlxEmbedder", "actor_options", "embed_corpus", "require_ray", "DEFAULT_RETRIES"]

# How often a dead actor is restarted and how often a batch it held is run
# again. Bounded, unlike Ray Data's default (forever), so a batch that kills
# its actor every time fails the job instead of looping.
DEFAULT_RETRIES = 3
_BLOCK_COLUMN = "__rlx_block"
# Ray Data settings for the length of one embed_corpus run (restored after it).
_CONTEXT = {"enable_progress_bars": False, "print_on_execution_start": False, "raise_original_map_exception": True}


def require_ray():
    """The ray module, or a MissingDependencyError saying which extra brings it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(f"the Ray integration needs Ray Data (pip install 'rlx[ray]'): {e}") from None
    return ray


def actor_options(num_cpus: float | None = None, num_gpus: float | None = None,
                  retries: int = DEFAULT_RETRIES) -> dict:
    """Keyword arguments for ``map_batches`` (its ``ray_remote_args``): the
    resources each actor reserves, and restart-and-retry on actor death."""
    if not is_integer(retries) or retries < 0:
        raise ConfigError(f"retries must be an integer >= 0, got {retries!r}")
    opts: dict = {"max_restarts": retries, "max_task_retries": retries}
    if num_cpus is not None:
        opts["num_cpus"] = num_cpus
    if num_gpus is not None:
        opts["num_gpus"] = num_gpus
    return opts


def _set_threads(threads: int | None) -> None:
    """RLX_NUM_THREADS for this actor's process: ``threads``, else the CPUs Ray
    reserved for the actor, so actors sharing a machine do not each start one
    thread per core. A value already in the environment wins over Ray's."""
    from rlx import env

    if threads is not None:
        if not is_integer(threads) or threads < 1:
            raise ConfigError(f"threads must be an integer >= 1, got {threads!r}")
        env.set_num_threads(threads)
        return
    if env.num_threads_given():
        return
    try:
        import ray

        if ray.is_initialized():
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
            if cpus:
                env.set_num_threads(max(1, int(cpus)))
    except ImportError:
        pass


def _texts(batch, column: str) -> list:
    """The text column of a dict-of-numpy, pandas or pyarrow batch, as a list."""
    pa = require_pyarrow()
    if isinstance(batch, pa.Table):
        if column not in batch.column_names:
            raise InputError(f"the batch has no column {column!r} (columns: {', '.join(batch.column_names)})")
        return batch.column(column).to_pylist()
    if isinstance(batch, dict):
        if column not in batch:
            raise InputError(f"the batch has no column {column!r} (columns: {', '.join(batch)})")
        return list(np.asarray(batch[column]).tolist())
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - Ray Data depends on pandas
        pd = None
    if pd is not None and isinstance(batch, pd.DataFrame):
        if column not in batch.columns:
            raise InputError(f"the batch has no column {column!r} (columns: {', '.join(map(str, batch.columns))})")
        return batch[column].tolist()
    raise InputError(f"a batch must be a dict of numpy arrays, a pandas DataFrame or a pyarrow Table, "
                     f"got a {type(batch).__name__}")


def _with_column(batch, column: str, vectors: np.ndarray):
    """The batch as a pyarrow Table with ``column`` (fixed_size_list<float32>[dim]) set."""
    pa = require_pyarrow()
    if isinstance(batch, pa.Table):
        table = batch
    elif isinstance(batch, dict):
        from ray.data.block import BlockAccessor

        table = BlockAccessor.batch_to_block(batch)   # handles multi-dimensional (tensor) columns too
    else:
        table = pa.Table.from_pandas(batch, preserve_index=False)
    array = vectors_to_arrow(vectors)
    if column in table.column_names:
        return table.set_column(table.column_names.index(column), column, array)
    return table.append_column(column, array)


class RlxEmbedder:
    """One embedder per Ray actor, for ``Dataset.map_batches``.

    model, device, precision: as ``rlx embed`` (``load_embedder``); each actor
    loads its own copy, so one GPU actor a GPU is ``device="cuda"`` with
    ``num_gpus=1`` in ``actor_options``. text_column: the strings read;
    output_column: the float32 vectors written, as an Arrow
    ``fixed_size_list<float32>[dim]`` column (one list per row; Parquet
    stores it as is). batch_size: texts per ``encode`` batch inside a Ray
    batch. threads: RLX_NUM_THREADS for the actor (default: the CPUs Ray
    reserved for it).

    Batches may be dicts of numpy arrays (Ray's ``"numpy"`` batch format),
    pandas DataFrames or pyarrow Tables; each comes back as a pyarrow Table
    with every input column plus ``output_column``.
    """

    def __init__(self, model: str | os.PathLike | None = None, device: str | None = "cpu", precision: str = "f32",
                 text_column: str = "text", output_column: str = "embedding", batch_size: int = 32,
                 threads: int | None = None) -> None:
        from rlx.models import load_embedder

        _set_threads(threads)
        self.embedder = load_embedder(model, device=device, precision=precision)
        self.text_column = text_column
        self.output_column = output_column
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(texts, batch_size=self.batch_size)

    def __call__(self, batch):
        return _with_column(batch, self.output_column, self.embed(_texts(batch, self.text_column)))


class _BlockEmbedder:
    """The actor of ``embed_corpus``: each input row names a corpus block; the
    actor reads that block's texts itself (only the data crosses to it once)
    and returns its rows' indices and vectors, tagged with the block."""

    def __init__(self, corpus_path: str, corpus_format: str, text_column: str, vector_column: str,
                 **embedder_kwargs) -> None:
        self.path, self.format, self.text_column = corpus_path, corpus_format, text_column
        self.vector_column = vector_column
        self.embedder = RlxEmbedder(text_column=text_column, **embedder_kwargs)

    def __call__(self, batch: dict) -> object:
        pa = require_pyarrow()
        blocks, rows, vectors = [], [], []
        for fields in zip(*(batch[k] for k in ("index", "start", "stop", "byte_start", "byte_stop"))):
            block = Block(*(int(v) for v in fields))
            vectors.append(self.embedder.embed(read_block_texts(self.path, self.format, self.text_column, block)))
            blocks.append(np.full(block.rows, block.index, np.int64))
            rows.append(np.arange(block.start, block.stop, dtype=np.int64))
        return pa.table({_BLOCK_COLUMN: np.concatenate(blocks), ROW_COLUMN: np.concatenate(rows),
                         self.vector_column: vectors_to_arrow(np.concatenate(vectors))})


def embed_corpus(input_path: str | os.PathLike, output_dir: str | os.PathLike, *, text_column: str = "text",
                 vector_column: str = "embedding", model: str | os.PathLike | None = None,
                 device: str | None = "cpu", precision: str = "f32", actors: int = 1, batch_size: int = 32,
                 block_rows: int = DEFAULT_BLOCK_ROWS, address: str | None = None, overwrite: bool = False,
                 cpus_per_actor: float = 1, gpus_per_actor: float | None = None, retries: int = DEFAULT_RETRIES,
                 progress: Callable[[int, int], None] | None = None, log: Callable[[str], None] | None = None) -> dict:
    """Embed a Parquet or JSONL corpus into ``output_dir`` as one Parquet part
    per block of ``block_rows`` rows (columns ``row`` and ``vector_column``),
    on ``actors`` Ray actors; resumes a run whose manifest matches.

    Everything that can be checked without Ray is checked first (the corpus,
    its text column, the model, the settings, the output folder's manifest).
    Connects to the cluster at ``address`` ("auto": the running one), or
    starts a local one, unless Ray is already initialized in this process.
    progress(done, total) is called with blocks after each part is written.
    Returns a summary: rows, blocks, blocks skipped, blocks embedded, seconds.
    """
    from rlx.models.bert import DEFAULT_MODEL, PRECISIONS, resolve_model_path
    from rlx.models.embedder import _positive_int

    log = log or (lambda msg: None)
    for what, value in (("actors", actors), ("batch_size", batch_size)):
        _positive_int(what, value)
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if vector_column == ROW_COLUMN:
        raise ConfigError(f"the vector column cannot be named {ROW_COLUMN!r} (the row index column)")
    corpus = open_corpus(input_path, text_column, block_rows)
    resolve_model_path(model)   # a missing model fails here, not in every actor
    folder = OutputFolder(output_dir)
    folder.prepare({"input": corpus.fingerprint(), "text_column": text_column, "vector_column": vector_column,
                    "block_rows": block_rows, "blocks": len(corpus.blocks), "model": str(model or DEFAULT_MODEL),
                    "precision": precision}, overwrite=overwrite)
    done = folder.done(corpus)
    pending = [b for b in corpus.blocks if b.index not in done]
    total = len(corpus.blocks)
    summary = {"rows": corpus.rows, "blocks": total, "skipped": len(done), "embedded": 0, "seconds": 0.0,
               "output": str(folder.path)}
    log(f"{corpus.path}: {corpus.rows} rows in {total} block(s) of {block_rows}; {len(done)} already done, "
        f"{len(pending)} to embed on {actors} actor(s)")
    if progress is not None:
        progress(len(done), total)
    if not pending:
        return summary

    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    t0 = time.perf_counter()
    # The blocks-done line is the progress; an actor's error comes back as itself (a CorpusError naming
    # the row), not as Ray's UserCodeException around a traceback string.
    ctx = ray.data.DataContext.get_current()
    saved_ctx = {k: getattr(ctx, k) for k in _CONTEXT}
    try:
        for k, v in _CONTEXT.items():
            setattr(ctx, k, v)
        descriptors = [{"index": b.index, "start": b.start, "stop": b.stop, "byte_start": b.byte_start,
                        "byte_stop": b.byte_stop} for b in pending]
        ds = ray.data.from_items(descriptors, override_num_blocks=len(descriptors))
        with warnings.catch_warnings():
            # Ray 2.60 takes max_restarts / max_task_retries only through ray_remote_args, which it marks
            # deprecated (to go in 2.64) without a named replacement yet.
            warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
            ds = ds.map_batches(
                _BlockEmbedder, batch_size=1, batch_format="numpy",
                fn_constructor_kwargs={"corpus_path": str(corpus.path), "corpus_format": corpus.format,
                                       "text_column": text_column, "vector_column": vector_column, "model": model,
                                       "device": device, "precision": precision, "batch_size": batch_size},
                compute=ray.data.ActorPoolStrategy(size=min(actors, len(pending))),
                **actor_options(num_cpus=cpus_per_actor, num_gpus=gpus_per_actor, retries=retries))
        expected = {b.index: b for b in pending}
        partial: dict[int, list] = {}
        try:
            for table in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                _collect(table, expected, partial)
                for index in [i for i in partial if sum(t.num_rows for t in partial[i]) >= expected[i].rows]:
                    _write_block(folder, expected[index], partial.pop(index), vector_column)
                    summary["embedded"] += 1
                    if progress is not None:
                        progress(len(done) + summary["embedded"], total)
        except Exception as e:
            cause = _rlx_cause(e)
            if cause is None:
                raise
            raise type(cause)(f"{cause} ({summary['embedded']} block(s) finished before the failure are kept; "
                              f"a rerun resumes)") from None
        if partial or summary["embedded"] != len(pending):
            missing = sorted(set(expected) - folder.done(corpus))
            raise InputError(f"Ray returned no complete result for block(s) {missing[:10]}; rerun to retry them")
    finally:
        summary["seconds"] = time.perf_counter() - t0
        for k, v in saved_ctx.items():
            setattr(ctx, k, v)
        if started:
            ray.shutdown()
    return summary


def _rlx_cause(exc: BaseException) -> RlxError | None:
    """The innermost RlxError in ``exc``'s chain of causes: Ray re-raises an
    actor's exception as a RayTaskError subclass of it whose message is the
    remote traceback, and keeps the exception itself in ``.cause``."""
    found, seen = None, set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, RlxError):
            found = exc
        seen.add(id(exc))
        exc = getattr(exc, "cause", None) or exc.__cause__ or exc.__context__
    return found


def _collect(table, expected: dict[int, Block], partial: dict[int, list]) -> None:
    """File one result batch's rows under their blocks (Ray may split or join
    a block's rows across result batches)."""
    import pyarrow.compute as pc

    blocks = table.column(_BLOCK_COLUMN)
    for index in pc.unique(blocks).to_pylist():
        if index not in expected:
            raise InputError(f"Ray returned rows of block {index}, which was not asked for")
        partial.setdefault(index, []).append(table.filter(pc.equal(blocks, index)))


def _write_block(folder: OutputFolder, block: Block, tables: list, vector_column: str) -> Path:
    """The block's part, once its rows are exactly rows start..stop-1 (none lost, none twice)."""
    pa = require_pyarrow()
    table = pa.concat_tables(tables).sort_by(ROW_COLUMN)
    rows = table.column(ROW_COLUMN).to_numpy()
    if not np.array_equal(rows, np.arange(block.start, block.stop)):
        raise InputError(f"block {block.index}: Ray returned {len(rows)} rows, not rows {block.start}.."
                         f"{block.stop - 1} once each")
    return folder.write_part(block.index, rows, arrow_to_vectors(table.column(vector_column)), vector_column)
