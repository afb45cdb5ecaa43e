"""LLM tokenizer read from GGUF metadata: llama.cpp's SentencePiece ("llama") tokenizer, id for id.

    tok = Tokenizer.from_gguf("gemma-3-270m.gguf")      # or an open rlx.gguf.GGUFFile
    ids = tok.encode("<start_of_turn>user\\nHi<end_of_turn>\\n")   # [2, 105, 2364, 107, ...]
    tok.decode(ids)                                     # control tokens (<bos>, <start_of_turn>) dropped
    stream = tok.decode_stream()
    for i in ids:
        print(stream.push(i), end="")                   # text only once a UTF-8 sequence is complete

A GGUF file carries its vocabulary (``tokenizer.ggml.tokens``, ``scores``, ``token_type``, the special ids
and the add-BOS/EOS/space-prefix switches), and llama.cpp is the reference for what it means: the ids a
model was run with are llama.cpp's, so they are matched exactly (llama.cpp's ``src/llama-vocab.cpp``:
``tokenizer_st_partition``, ``llm_tokenizer_spm_session``, ``token_to_piece``, ``detokenize``).

Approach: llama.cpp's SPM algorithm in pure Python, not the ``tokenizers`` package. A ``tokenizers`` BPE
(``byte_fallback=True``, merges derived from the scores as transformers' SentencePiece converters do,
``" "`` -> ``"▁"`` normalizer, special tokens split out beforehand by the same partition as here) was
tried against llama-cpp-python 0.3.36 on Gemma 3's 262,144-token vocabulary: MEASURED_EVIDENCE.
The pure-Python merge loop (a heap over adjacent pairs) tokenizes a 2,000-token prompt in about
MEASURED_TIME and needs no merge table.

Only ``tokenizer.ggml.model == "llama"`` is supported; other models ("gpt2" BPE with merges, "bert",
"t5", ...) raise ``ModelLoadError`` naming the model, and a missing or malformed key raises
``ModelLoadError`` naming the key.
"""

from __future__ import annotations

import codecs
import heapq
import os
from collections.abc import Iterable, Mapping, Sequence
from enum import IntFlag
from typing import Any

from rlx.errors import InputError, ModelLoadError

__all__ = ["Tokenizer", "TokenAttr", "StreamDecoder"]

_SPACE = "\u2581"   # "▁", SentencePiece's escaped space

# GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
_TYPE_UNDEFINED, _TYPE_NORMAL, _TYPE_UNKNOWN, _TYPE_CONTROL, _TYPE_USER_DEFINED, _TYPE_UNUSED, _TYPE_BYTE = range(7)


class TokenAttr(IntFlag):
    """llama.cpp's ``llama_token_attr``: what a token is, which decides how it is matched and rendered."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5


# Attributes are kept as plain ints internally (IntFlag arithmetic is slow over 262,144 tokens).
_UNKNOWN, _UNUSED, _NORMAL, _CONTROL, _USER_DEFINED, _BYTE = (int(a) for a in (
    TokenAttr.UNKNOWN, TokenAttr.UNUSED, TokenAttr.NORMAL, TokenAttr.CONTROL, TokenAttr.USER_DEFINED, TokenAttr.BYTE))
_ATTR_OF_TYPE = {_TYPE_UNDEFINED: 0, _TYPE_NORMAL: _NORMAL, _TYPE_UNKNOWN: _UNKNOWN, _TYPE_CONTROL: _CONTROL,
                 _TYPE_USER_DEFINED: _USER_DEFINED, _TYPE_UNUSED: _UNUSED, _TYPE_BYTE: _BYTE}
_SPECIAL = _CONTROL | _UNKNOWN              # dropped by decode unless special=True
_PARTITIONED = _SPECIAL | _USER_DEFINED     # matched verbatim in the text before SPM runs

# Token texts llama.cpp treats as end of generation (and forces to CONTROL), whatever their type in the file.
_EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
})
_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
              "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")

_K = "tokenizer.ggml."


class Tokenizer:
    """A SentencePiece-style (llama.cpp "llama"/SPM) tokenizer whose ids equal llama.cpp's.

    Build it with ``from_gguf`` or ``from_metadata``; the constructor takes the decoded vocabulary.
    Tokens are looked up by their exact text; ``scores`` rank the merges (higher merges first).
    """

    def __init__(self, tokens: Sequence[str], scores: Sequence[float] | None = None,
                 token_types: Sequence[int] | None = None, *, bos_id: int | None = 1, eos_id: int | None = 2,
                 unk_id: int | None = 0, pad_id: int | None = None, eot_id: int | None = None,
                 add_bos: bool = True, add_eos: bool = False, add_space_prefix: bool = True,
                 source: str = "tokenizer") -> None:
        n = len(tokens)
        if n == 0:
            raise ModelLoadError(f"{source}: {_K}tokens is empty")
        # llama.cpp renames empty tokens rather than letting them match the empty string.
        self._tokens: list[str] = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self._scores: list[float] = [float(s) for s in scores] if scores is not None else [0.0] * n
        types = list(token_types) if token_types is not None else [_TYPE_NORMAL] * n
        attr_of = _ATTR_OF_TYPE.get
        self._attrs: list[int] = [attr_of(t, 0) for t in types[:n]]
        self._to_id: dict[str, int] = {}
        for i, t in enumerate(self._tokens):
            if self._to_id.setdefault(t, i) != i:
                raise ModelLoadError(f"{source}: duplicate token {t!r} in {_K}tokens (ids {self._to_id[t]} and {i})")
        self.vocab_size: int = n
        for name, value in (("bos", bos_id), ("eos", eos_id), ("unk", unk_id), ("pad", pad_id), ("eot", eot_id)):
            if value is not None and not 0 <= value < n:
                raise ModelLoadError(f"{source}: {name} token id {value} is outside the vocabulary (0..{n - 1})")
        if add_bos and bos_id is None:
            raise ModelLoadError(f"{source}: {_K}add_bos_token is true, but {_K}bos_token_id is not set")
        if add_eos and eos_id is None:
            raise ModelLoadError(f"{source}: {_K}add_eos_token is true, but {_K}eos_token_id is not set")
        self.bos_id, self.eos_id, self.unk_id, self.pad_id = bos_id, eos_id, unk_id, pad_id
        self.add_bos, self.add_eos, self.add_space_prefix = bool(add_bos), bool(add_eos), bool(add_space_prefix)

        # llama.cpp's load-time fix-ups by token text: end-of-turn style tokens are control tokens and end
        # generation; control tokens named "...unused..." are also UNUSED.
        if eot_id is None:
            eot_id = next((self._to_id[t] for t in _EOT_TEXTS if t in self._to_id), None)
        self.eot_id: int | None = eot_id
        eog = {i for t, i in self._to_id.items() if t in _EOG_TEXTS}
        for i in eog | ({eot_id} if eot_id is not None else set()):
            self._attrs[i] |= _CONTROL
        attrs = self._attrs
        for i, t in enumerate(self._tokens):
            if attrs[i] & _CONTROL and "unused" in t:
                attrs[i] |= _UNUSED
        eog |= {i for i in (eos_id, eot_id) if i is not None}
        self.eog_ids: frozenset[int] = frozenset(eog)

        # Byte fallback: "<0xXX>" (upper-case hex, as llama.cpp spells it), else the byte itself as a token.
        self._byte_ids: list[int | None] = []
        for b in range(256):
            tid = self._to_id.get(f"<0x{b:02X}>")
            if tid is None and b < 0x80:
                tid = self._to_id.get(chr(b))
            self._byte_ids.append(tid)
        self._byte_of: dict[int, int] = {}
        for i, a in enumerate(self._attrs):
            if a & _BYTE:
                t = self._tokens[i]
                try:
                    if len(t) != 6 or not t.startswith("<0x") or not t.endswith(">"):
                        raise ValueError
                    self._byte_of[i] = int(t[3:5], 16)
                except ValueError:
                    raise ModelLoadError(f"{source}: token {i} {t!r} has the BYTE type but is not <0xXX>") from None

        # Special tokens, longest text (in UTF-8 bytes) first as llama.cpp sorts them; equal lengths keep id
        # order (llama.cpp's std::sort leaves them unspecified; it matters only for equal-length tokens that
        # overlap, which Gemma 3's vocabulary has none of). Grouped by their first two characters so that a
        # text is searched once per group rather than once per token (Gemma 3 has 6,414 special tokens).
        special = sorted((i for i, a in enumerate(self._attrs) if a & _PARTITIONED),
                         key=lambda i: -len(self._tokens[i].encode()))
        self._special: list[tuple[int, str, bool]] = [
            (i, self._tokens[i], bool(self._attrs[i] & _SPECIAL)) for i in special]
        self._special_groups: dict[str, list[int]] = {}
        for rank, (_, text, _) in enumerate(self._special):
            self._special_groups.setdefault(text[:2], []).append(rank)

    # ------------------------------------------------------------------------------------------- construction

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], *, source: str = "GGUF metadata") -> Tokenizer:
        """Build from a GGUF metadata mapping (``rlx.gguf.GGUFFile.metadata``, or a plain dict in tests).

        Defaults are llama.cpp's for an SPM vocabulary where a key is absent: scores 0, every token
        NORMAL, BOS 1, EOS 2, UNK 0, add BOS, no EOS, add a space prefix.
        """
        model = metadata.get(_K + "model")
        if model is None:
            raise ModelLoadError(f"{source}: no {_K}model key: the file carries no tokenizer")
        if not isinstance(model, str):
            raise ModelLoadError(f"{source}: {_K}model must be a string, got {type(model).__name__}")
        if model != "llama":
            raise ModelLoadError(f"{source}: {_K}model is {model!r}; only 'llama' (SentencePiece) tokenizers are "
                                 "supported")
        tokens = _list(metadata, "tokens", str, source, required=True)
        n = len(tokens)
        scores = _list(metadata, "scores", (int, float), source, at_least=n)
        types = _list(metadata, "token_type", int, source, at_least=n)

        def ident(key: str, default: int | None) -> int | None:
            value = metadata.get(_K + key, default)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ModelLoadError(f"{source}: {_K}{key} must be an integer, got {value!r}")
            return value

        def flag(key: str, default: bool) -> bool:
            value = metadata.get(_K + key, default)
            if not isinstance(value, bool):
                raise ModelLoadError(f"{source}: {_K}{key} must be a bool, got {value!r}")
            return value

        return cls(tokens, scores, types, bos_id=ident("bos_token_id", 1), eos_id=ident("eos_token_id", 2),
                   unk_id=ident("unknown_token_id", 0), pad_id=ident("padding_token_id", None),
                   eot_id=ident("eot_token_id", None), add_bos=flag("add_bos_token", True),
                   add_eos=flag("add_eos_token", False), add_space_prefix=flag("add_space_prefix", True),
                   source=source)

    @classmethod
    def from_gguf(cls, file: str | os.PathLike[str] | Any) -> Tokenizer:
        """Build from a GGUF file: a path (opened and closed here) or an open ``rlx.gguf.GGUFFile``."""
        from rlx import gguf

        if isinstance(file, gguf.GGUFFile):
            return cls.from_metadata(file.metadata, source=str(file.path))
        with gguf.open(file) as f:
            return cls.from_metadata(f.metadata, source=str(f.path))

    # ------------------------------------------------------------------------------------------------ lookups

    def token_text(self, token_id: int) -> str:
        """The token's text as stored in the vocabulary (with ``▁`` for spaces)."""
        return self._tokens[self._check(token_id)]

    def token_to_id(self, text: str) -> int | None:
        """The id of the token whose vocabulary text is exactly ``text``, or None."""
        return self._to_id.get(text)

    def token_attr(self, token_id: int) -> TokenAttr:
        return TokenAttr(self._attrs[self._check(token_id)])

    def is_control(self, token_id: int) -> bool:
        return bool(self._attrs[self._check(token_id)] & _CONTROL)

    def is_eog(self, token_id: int) -> bool:
        """Whether generation should stop at this token (EOS, ``<end_of_turn>`` and llama.cpp's other EOG texts)."""
        return token_id in self.eog_ids

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(llama/SPM, {self.vocab_size} tokens, bos={self.bos_id}, eos={self.eos_id})"

    def _check(self, token_id: int) -> int:
        if not 0 <= token_id < self.vocab_size:
            raise InputError(f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})")
        return token_id

    # ------------------------------------------------------------------------------------------------- encode

    def encode(self, text: str, *, add_bos: bool | None = None, add_eos: bool | None = None,
               parse_special: bool = True) -> list[int]:
        """The token ids of ``text``, equal to llama.cpp's ``llama_tokenize``.

        ``add_bos`` / ``add_eos``: None follows the file (``add_bos_token``, ``add_eos_token``); llama.cpp's
        ``add_special=True`` is both None, ``add_special=False`` both False. ``parse_special``: control
        tokens written in the text (``<start_of_turn>``, ``<bos>``) become their ids; user-defined tokens
        (Gemma's whitespace runs and HTML tags) are matched either way, as llama.cpp does.
        """
        if not isinstance(text, str):
            raise InputError(f"encode() takes a str, got {type(text).__name__}")
        bos = self.add_bos if add_bos is None else add_bos
        eos = self.add_eos if add_eos is None else add_eos
        out: list[int] = []
        if bos:
            if self.bos_id is None:
                raise InputError("add_bos=True, but the vocabulary has no BOS token")
            out.append(self.bos_id)
        prev_special = True   # a space prefix goes before the first text and before text after a special token
        for frag in self._partition(text, parse_special) if text else ():
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
            else:
                if self.add_space_prefix and prev_special:
                    frag = " " + frag
                self._spm(frag.replace(" ", _SPACE), out)
                prev_special = False
        if eos:
            if self.eos_id is None:
                raise InputError("add_eos=True, but the vocabulary has no EOS token")
            out.append(self.eos_id)
        return out

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """llama.cpp's tokenizer_st_partition: split out every occurrence of each special token, one token at a
        time, longest first, left to right within each remaining piece of text."""
        ranks: list[int] = []
        for key, members in self._special_groups.items():
            if key in text:
                ranks.extend(members)
        ranks.sort()
        frags: list[str | int] = [text]
        for rank in ranks:
            tid, s, control = self._special[rank]
            if (control and not parse_special) or s not in text:
                continue
            out: list[str | int] = []
            for f in frags:
                if isinstance(f, str) and s in f:
                    for k, part in enumerate(f.split(s)):
                        if k:
                            out.append(tid)
                        if part:
                            out.append(part)
                else:
                    out.append(f)
            frags = out
        return frags

    def _spm(self, text: str, out: list[int]) -> None:
        """llama.cpp's llm_tokenizer_spm_session on one escaped piece of text: start from single characters and
        repeatedly merge the adjacent pair whose concatenation is a token with the highest score (leftmost on a
        tie); symbols that end up not being tokens fall back to byte tokens."""
        n = len(text)
        if n == 0:
            return
        to_id, scores = self._to_id, self._scores
        length = [1] * n                 # symbol i covers text[i:i + length[i]]; 0 once merged into its left
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        heap: list[tuple[float, int, int, int]] = []
        for i in range(1, n):
            tid = to_id.get(text[i - 1:i + 1])
            if tid is not None:
                heap.append((-scores[tid], i - 1, i, 2))
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            _, left, right, size = pop(heap)
            ln, rn = length[left], length[right]
            if not ln or not rn or ln + rn != size:
                continue                 # one side has changed since the pair was queued
            length[left] = size
            length[right] = 0
            after = nxt[right]
            nxt[left] = after
            if after >= 0:
                prev[after] = left
            before = prev[left]
            if before >= 0:
                m = length[before] + size
                tid = to_id.get(text[before:before + m])
                if tid is not None:
                    push(heap, (-scores[tid], before, left, m))
            if after >= 0:
                m = size + length[after]
                tid = to_id.get(text[left:left + m])
                if tid is not None:
                    push(heap, (-scores[tid], left, after, m))
        i = 0
        while i >= 0:
            piece = text[i:i + length[i]]
            tid = to_id.get(piece)
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self._byte_token(b) for b in piece.encode("utf-8"))
            i = nxt[i]

    def _byte_token(self, b: int) -> int:
        tid = self._byte_ids[b]
        if tid is None:
            if self.unk_id is None:
                raise InputError(f"byte 0x{b:02X} has no byte token and the vocabulary has no unknown token")
            return self.unk_id
        return tid

    # ------------------------------------------------------------------------------------------------- decode

    def token_to_piece(self, token_id: int, *, special: bool = False) -> bytes:
        """The bytes one token stands for (llama.cpp's ``llama_token_to_piece`` with lstrip 0).

        Normal tokens with ``▁`` turned back into spaces; byte tokens their single byte (so a multibyte
        character split into byte tokens is incomplete piece by piece); user-defined tokens verbatim; control
        and unknown tokens nothing unless ``special`` (then their text); unused and undefined tokens nothing.
        """
        attr = self._attrs[self._check(token_id)]
        if attr & _SPECIAL:
            return self._tokens[token_id].encode() if special else b""
        if attr & _USER_DEFINED:
            return self._tokens[token_id].encode()
        if attr & _NORMAL:
            return self._tokens[token_id].replace(_SPACE, " ").encode()
        if attr & _BYTE:
            return bytes((self._byte_of[token_id],))
        return b""

    def decode_bytes(self, ids: Iterable[int], *, special: bool = False) -> bytes:
        """The bytes of ``ids`` (llama.cpp's ``llama_detokenize`` with remove_special=False,
        unparse_special=``special``): the pieces joined, and, where the vocabulary adds a space prefix, one
        leading space of the first piece removed."""
        out = bytearray()
        first = True
        for i in ids:
            piece = self.token_to_piece(int(i), special=special)
            if first:
                if self.add_space_prefix and piece.startswith(b" "):
                    piece = piece[1:]
                first = False
            out += piece
        return bytes(out)

    def decode(self, ids: Iterable[int], *, special: bool = False) -> str:
        """The text of ``ids``: ``decode_bytes`` as UTF-8, with U+FFFD for incomplete or invalid sequences.

        ``special=False`` drops control tokens (``<bos>``, ``<start_of_turn>``), as llama.cpp does by default;
        ``special=True`` writes them out, so that ``encode(decode(ids, special=True))`` gives the ids back.
        """
        return self.decode_bytes(ids, special=special).decode("utf-8", errors="replace")

    def decode_stream(self, *, special: bool = False) -> StreamDecoder:
        """An incremental decoder for generation: ``push(id)`` returns the text that id completes."""
        return StreamDecoder(self, special=special)


class StreamDecoder:
    """Decodes ids one at a time, returning text only once its UTF-8 sequences are complete.

    A character split over byte tokens (an emoji, a rare CJK character) comes out whole with the token that
    ends it, never as U+FFFD halves; the concatenated outputs of ``push`` and ``flush`` equal
    ``Tokenizer.decode`` of all the ids.
    """

    def __init__(self, tokenizer: Tokenizer, *, special: bool = False) -> None:
        self._tok = tokenizer
        self._special = special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._first = True

    def push(self, token_id: int) -> str:
        piece = self._tok.token_to_piece(int(token_id), special=self._special)
        if self._first:
            if self._tok.add_space_prefix and piece.startswith(b" "):
                piece = piece[1:]
            self._first = False
        return self._utf8.decode(piece)

    def flush(self) -> str:
        """The rest: bytes of an unfinished sequence, as U+FFFD. The decoder can be used again afterwards."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text


def _list(metadata: Mapping[str, Any], key: str, kind: type | tuple[type, ...], source: str, *,
          required: bool = False, at_least: int = 0) -> list | None:
    """A metadata array, checked: a list of ``kind`` values (bools are not numbers here), at least
    ``at_least`` long (llama.cpp reads the first n_tokens entries)."""
    value = metadata.get(_K + key)
    if value is None:
        if required:
            raise ModelLoadError(f"{source}: no {_K}{key} key: the tokenizer has no vocabulary")
        return None
    if not isinstance(value, (list, tuple)):
        raise ModelLoadError(f"{source}: {_K}{key} must be an array, got {type(value).__name__}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, kind):
            raise ModelLoadError(f"{source}: {_K}{key}[{i}] is {v!r}, not a "
                                 f"{kind.__name__ if isinstance(kind, type) else 'number'}")
    if len(value) < at_least:
        raise ModelLoadError(f"{source}: {_K}{key} has {len(value)} entries, fewer than the {at_least} tokens")
    return list(value)
