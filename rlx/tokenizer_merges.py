"""The BPE merge table of a SentencePiece vocabulary, derived from its
scores (rlx.tokenizer's ``tokenizers`` engine), and its on-disk cache.

Deriving it tries every split of every token into two vocabulary pieces:
2.3 million dictionary lookups for Gemma 3's 262,144 tokens, about 1.6 s of
Python on a 2-core Xeon, paid by every ``load_llm``. The table depends only
on the tokens, their scores and which are user-defined, so it is kept under
``RLX_CACHE_DIR/tokenizers/`` keyed by a hash of exactly those, and a cache
that cannot be read or written only costs the derivation again.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence

import numpy as np

from rlx import env
from rlx.atomic_file import write_atomic

__all__ = ["merge_table"]

# Bumped whenever the derivation's rules change, so an old table is never read.
FORMAT = 1


def merge_table(tokens: Sequence[str], scores: Sequence[float], user_defined: Sequence[bool],
                piece_id: Callable[[str], int | None], id_count: int) -> list[tuple[int, int]] | str:
    """The merges as (left id, right id) pairs, first merged first; or why
    no merge table reproduces llama.cpp here (two merge-made tokens of one
    score). ``piece_id`` maps a piece to its id (the vocabulary and its
    placeholder characters); every id is below ``id_count``."""
    path = env.cache_dir() / "tokenizers" / f"merges-{_key(tokens, scores, user_defined)}.npy"
    cached = _read(path, id_count)
    if cached is not None:
        return cached
    merges = _derive(tokens, scores, user_defined, piece_id)
    if isinstance(merges, str):
        return merges
    buf = io.BytesIO()
    np.save(buf, np.asarray(merges, dtype=np.int32).reshape(-1, 2), allow_pickle=False)
    try:
        write_atomic(path, buf.getvalue())
    except OSError:
        pass   # an unwritable cache folder: the next load derives the table again
    return merges


def _derive(tokens: Sequence[str], scores: Sequence[float], user_defined: Sequence[bool],
            piece_id: Callable[[str], int | None]) -> list[tuple[int, int]] | str:
    """As transformers' SentencePiece converters: every split of a token into
    two pieces, highest score first, one token's splits in (left id, right id)
    order. User-defined tokens get none (their text is split out before the
    merge loop runs)."""
    merges: list[tuple[float, int, int]] = []
    made_by: dict[float, int] = {}
    for i, t in enumerate(tokens):
        if len(t) < 2 or user_defined[i]:
            continue
        local = [(left, right) for k in range(1, len(t))
                 if (left := piece_id(t[:k])) is not None and (right := piece_id(t[k:])) is not None]
        if local:
            j = made_by.setdefault(scores[i], i)
            if j != i:
                return (f"tokens {j} {tokens[j]!r} and {i} {t!r} share the score {scores[i]} (llama.cpp then "
                        "merges the leftmost pair, which a merge table cannot express)")
            if len(local) > 1:
                local.sort()
            score = -scores[i]
            merges += [(score, left, right) for left, right in local]
    merges.sort(key=lambda m: m[0])     # stable: one token's splits keep their order
    return [(left, right) for _, left, right in merges]


def _key(tokens: Sequence[str], scores: Sequence[float], user_defined: Sequence[bool]) -> str:
    h = hashlib.sha256(f"rlx merge table {FORMAT}\0{len(tokens)}\0".encode())
    h.update("\0".join(tokens).encode("utf-8", "surrogatepass"))
    h.update(np.asarray(scores, dtype=np.float64).tobytes())
    h.update(np.asarray(user_defined, dtype=np.bool_).tobytes())
    return h.hexdigest()[:32]


def _read(path, id_count: int) -> list[tuple[int, int]] | None:
    """The cached table, or None when there is none or it is not a valid one."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if table.dtype != np.int32 or table.ndim != 2 or table.shape[1] != 2:
        return None
    if table.size and (table.min() < 0 or table.max() >= id_count):
        return None
    return [(int(a), int(b)) for a, b in table.tolist()]
