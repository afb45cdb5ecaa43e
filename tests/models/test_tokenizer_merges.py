"""rlx.tokenizer_merges: the merge table's cache gives the tokenizer the same
ids as deriving it, and a missing, damaged or unwritable cache only costs the
derivation (tiny_llm's vocabulary: special, byte and word tokens)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx import tokenizer_merges
from rlx.tokenizer import Tokenizer

from .tiny_llm import _vocabulary

TEXTS = ["the quick brown fox", "hello world model", "sphinx of black quartz, judge my vow!", "ünïcode 🎉 tabs\t",
         "  leading spaces and trailing  "]


def _tokenizer() -> Tokenizer:
    tokens, scores, types = _vocabulary()
    return Tokenizer(tokens, scores, types, bos_id=2, eos_id=1, unk_id=3, engine="tokenizers")


def _ids(tok: Tokenizer) -> list[list[int]]:
    return [tok.encode(t) for t in TEXTS]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    return tmp_path / "tokenizers"


def test_the_second_build_reads_the_table_and_encodes_the_same(cache, monkeypatch):
    first = _tokenizer()
    assert first.engine == "tokenizers"
    (table,) = cache.glob("merges-*.npy")
    assert np.load(table).shape[1] == 2 and len(np.load(table)) > 0

    def no_derivation(*args):
        raise AssertionError("derived again although the table is cached")

    monkeypatch.setattr(tokenizer_merges, "_derive", no_derivation)
    assert _ids(_tokenizer()) == _ids(first)
    assert _ids(first) == [Tokenizer(*_vocabulary(), bos_id=2, eos_id=1, unk_id=3, engine="python").encode(t)
                           for t in TEXTS]


@pytest.mark.parametrize("damage", [b"", b"not a numpy file", "ids out of range", "wrong shape", "float table"])
def test_a_damaged_table_is_derived_again(cache, damage):
    want = _ids(_tokenizer())
    (table,) = cache.glob("merges-*.npy")
    if damage == "ids out of range":
        np.save(table, np.array([[0, 10**6]], np.int32))
    elif damage == "wrong shape":
        np.save(table, np.zeros((4, 3), np.int32))
    elif damage == "float table":
        np.save(table, np.zeros((4, 2), np.float32))
    else:
        table.write_bytes(damage)
    assert _ids(_tokenizer()) == want
    assert np.load(table).dtype == np.int32 and np.load(table).shape[1] == 2   # rewritten whole


def test_another_vocabulary_gets_another_table(cache):
    _tokenizer()
    tokens, scores, types = _vocabulary()
    Tokenizer(tokens, [s + (1.0 if i == 300 else 0.0) for i, s in enumerate(scores)], types, bos_id=2, eos_id=1,
              unk_id=3, engine="tokenizers")
    assert len(list(cache.glob("merges-*.npy"))) == 2


def test_an_unwritable_cache_folder_only_costs_the_derivation(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("RLX_CACHE_DIR", str(blocker))
    assert _ids(_tokenizer()) == _ids(Tokenizer(*_vocabulary(), bos_id=2, eos_id=1, unk_id=3, engine="python"))
