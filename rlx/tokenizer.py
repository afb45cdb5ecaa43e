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

Approach: the ``tokenizers`` package, a BPE model with ``byte_fallback=True`` and merges derived from the
scores as transformers' SentencePiece converters do (``" "`` -> ``"▁"`` and llama.cpp's special-token
partition are done here: ``tokenizers``' added-token matching is leftmost-longest, llama.cpp's is longest
token first). Measured on Gemma 3's 262,144-token vocabulary against llama-cpp-python 0.3.36 (2 cores): the
same ids on all 24,232 encodes of 6,058 texts (the 58 fixture texts, 3,000 random mixes, 3,000 vocabulary
concatenations, each with add_special and parse_special on and off) and on 362,352 strings aimed at the
merge order (tokens with several splits, doubled, tripled and mixed); a 2,366-token prompt takes 17 ms,
building the merge table 1.8 s the first time (then read from its cache, rlx.tokenizer_merges). A merge
table cannot express llama.cpp's tie rule (equal scores: leftmost pair first; tokens "ab" and "ba" of one
score give "aba" -> ab|a but "bab" -> ba|b), so a vocabulary where two merge-made tokens share a score, or
a byte lacks its ``<0xXX>`` token, gets ``engine="python"``: llama.cpp's own loop
(``llm_tokenizer_spm_session``) in Python, exact on all of the above too, 22 ms for that prompt and 0.14 s
to build.

``tokenizer.ggml.model == "gpt2"`` (byte-level BPE with ranked merges: Llama 3, Qwen, SmolLM) takes
rlx.tokenizer_bpe's engine, the same ``tokenizers`` package fed the merges and the pre-tokenizer that
``tokenizer.ggml.pre`` names, behind the same special-token partition and decoding rules. Other models
("bert", "t5", ...) raise ``ModelLoadError`` naming the model, and a missing or malformed key raises
``ModelLoadError`` naming the key.
"""

from __future__ import annotations

import codecs
import heapq
import os
from collections.abc import Iterable, Mapping, Sequence
from enum import IntFlag
from typing import Any, Literal

from rlx.arg_types import is_integer
from rlx.errors import ConfigError, InputError, ModelLoadError
from rlx.gguf import GGUFFile
from rlx.gguf import open as gguf_open
from rlx.text_input import require_text
from rlx.tokenizer_bpe import BpeEngine, PreTokenizer, byte_decode, clean_spaces, pre_tokenizer
from rlx.tokenizer_merges import merge_table

__all__ = ["Tokenizer", "TokenAttr", "StreamDecoder"]

Engine = Literal["auto", "tokenizers", "python"]

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
    """A llama.cpp tokenizer whose ids equal llama.cpp's: SentencePiece-style ("llama"/SPM), or byte-level
    BPE ("gpt2") when built with ``bpe=(merges, pre-tokenizer)``.

    Build it with ``from_gguf`` or ``from_metadata``; the constructor takes the decoded vocabulary.
    Tokens are looked up by their exact text; for SPM ``scores`` rank the merges (higher merges first).
    """

    def __init__(self, tokens: Sequence[str], scores: Sequence[float] | None = None,
                 token_types: Sequence[int] | None = None, *, bos_id: int | None = 1, eos_id: int | None = 2,
                 unk_id: int | None = 0, pad_id: int | None = None, eot_id: int | None = None,
                 add_bos: bool = True, add_eos: bool = False, add_space_prefix: bool = True,
                 engine: Engine = "auto", source: str = "tokenizer",
                 bpe: tuple[Sequence[str], PreTokenizer] | None = None) -> None:
        n = len(tokens)
        if n == 0:
            raise ModelLoadError(f"{source}: {_K}tokens is empty")
        # llama.cpp renames empty tokens rather than letting them match the empty string.
        self._tokens: list[str] = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        self.vocab_size: int = n
        for key, values in (("scores", scores), ("token_type", token_types)):
            if values is not None and len(values) < n:
                raise ModelLoadError(f"{source}: {_K}{key} has {len(values)} entries, fewer than the {n} tokens")
        # Only the first n entries count, as in llama.cpp.
        self._scores: list[float] = [float(s) for s in scores[:n]] if scores is not None else [0.0] * n
        types = list(token_types[:n]) if token_types is not None else [_TYPE_NORMAL] * n
        attr_of = _ATTR_OF_TYPE.get
        self._attrs: list[int] = [attr_of(t, 0) for t in types]
        self._to_id: dict[str, int] = {}
        for i, t in enumerate(self._tokens):
            if self._to_id.setdefault(t, i) != i:
                raise ModelLoadError(f"{source}: duplicate token {t!r} in {_K}tokens (ids {self._to_id[t]} and {i})")
        for name, value in (("bos", bos_id), ("eos", eos_id), ("unk", unk_id), ("pad", pad_id), ("eot", eot_id)):
            if value is not None and not 0 <= value < n:
                raise ModelLoadError(f"{source}: {name} token id {value} is outside the vocabulary (0..{n - 1})")
        if add_bos and bos_id is None:
            raise ModelLoadError(f"{source}: {_K}add_bos_token is true, but {_K}bos_token_id is not set")
        if add_eos and eos_id is None:
            raise ModelLoadError(f"{source}: {_K}add_eos_token is true, but {_K}eos_token_id is not set")
        self.bos_id, self.eos_id, self.unk_id, self.pad_id = bos_id, eos_id, unk_id, pad_id
        self.add_bos, self.add_eos, self.add_space_prefix = bool(add_bos), bool(add_eos), bool(add_space_prefix)

        # llama.cpp's load-time fix-ups by token text: end-of-turn style tokens (every _EOT_TEXTS entry is in
        # _EOG_TEXTS) are control tokens and end generation; control tokens named "...unused..." are UNUSED too.
        if eot_id is None:
            eot_id = next((self._to_id[t] for t in _EOT_TEXTS if t in self._to_id), None)
        self.eot_id: int | None = eot_id
        attrs = self._attrs
        eog = {i for t, i in self._to_id.items() if t in _EOG_TEXTS}
        for i in eog:
            attrs[i] |= _CONTROL
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

        self._bpe: Any = None                      # the tokenizers engine, or None for the pure-Python one
        self._placeholders: dict[int, str] = {}
        if engine not in ("auto", "tokenizers", "python"):
            raise ConfigError(f"engine must be 'auto', 'tokenizers' or 'python', got {engine!r}")
        # Byte-level BPE ("gpt2"): its own tokenizers pipeline, no space prefix, bytes from the byte alphabet.
        self.model: str = "llama" if bpe is None else "gpt2"
        self._byte_level: BpeEngine | None = None
        self._clean_spaces = False
        if bpe is not None:
            if engine == "python":
                raise ConfigError(f"{source}: the python engine is SentencePiece's; a gpt2 vocabulary takes "
                                  "tokenizers")
            merges, pre = bpe
            self._byte_level = BpeEngine(self._tokens, self._to_id, merges, pre, source)
            self._clean_spaces = pre.clean_spaces
            self.engine = "tokenizers"
            return
        if engine != "python":
            built = self._build_bpe()
            if not isinstance(built, str):
                self._bpe, self._placeholders = built
            elif engine == "tokenizers":
                raise ConfigError(f"{source}: the tokenizers engine cannot reproduce llama.cpp here: {built}")
        self.engine: str = "tokenizers" if self._bpe is not None else "python"

    # ------------------------------------------------------------------------------------- the tokenizers engine

    def _build_bpe(self) -> tuple[Any, dict[int, str]] | str:
        """A ``tokenizers`` BPE fed this vocabulary, with its placeholders; or why it would not match llama.cpp.

        Merges are derived from the scores the way transformers' SentencePiece converters do: every split of
        a token into two vocabulary pieces, highest score first, one token's splits in (left id, right id)
        order; byte fallback on. User-defined tokens get no merges (every occurrence of their text is split
        out before the merge loop runs). Characters that occur inside tokens but are no token themselves get
        placeholder ids past the vocabulary, so that they can still merge (llama.cpp merges any adjacent pair
        whose text is a token); a placeholder left over becomes byte tokens after encoding.

        It would not match where two tokens that merges make share a score: llama.cpp ranks a pair by the
        score of the token it makes and breaks ties by position, a merge table ranks pairs by their index.
        Nor where a byte has no ``<0xXX>`` token: ``tokenizers`` then falls back to unk per character,
        llama.cpp per byte.
        """
        tokens, scores, attrs, to_id = self._tokens, self._scores, self._attrs, self._to_id
        missing = [b for b in range(256) if f"<0x{b:02X}>" not in to_id]
        if missing:
            return f"{len(missing)} bytes have no <0xXX> token (the first: 0x{missing[0]:02X})"
        n = len(tokens)
        vocab = dict(to_id)
        placeholders: dict[int, str] = {}
        for ch in sorted({c for t in tokens for c in t} - to_id.keys() - {" "}):   # the text never holds " "
            vocab[ch] = n + len(placeholders)
            placeholders[vocab[ch]] = ch
        merges = merge_table(tokens, scores, [bool(a & _USER_DEFINED) for a in attrs], vocab.get,
                             n + len(placeholders))
        if isinstance(merges, str):
            return merges
        text_of = [*tokens, *placeholders.values()]

        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import models

        bpe = models.BPE(vocab, [(text_of[a], text_of[b]) for a, b in merges], byte_fallback=True,
                         unk_token=tokens[self.unk_id] if self.unk_id is not None else None)
        return HFTokenizer(bpe), placeholders

    # ------------------------------------------------------------------------------------------- construction

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], *, engine: Engine = "auto",
                      source: str = "GGUF metadata") -> Tokenizer:
        """Build from a GGUF metadata mapping (``rlx.gguf.GGUFFile.metadata``, or a plain dict in tests).

        Defaults are llama.cpp's for an SPM vocabulary where a key is absent: scores 0, every token
        NORMAL, BOS 1, EOS 2, UNK 0, add BOS, no EOS, add a space prefix. ``engine``: "tokenizers" (a
        ``tokenizers`` BPE; refused where it cannot match llama.cpp), "python" (llama.cpp's loop in Python),
        or "auto" (the first where it matches, else the second).
        """
        model = metadata.get(_K + "model")
        if model is None:
            raise ModelLoadError(f"{source}: no {_K}model key: the file carries no tokenizer")
        if not isinstance(model, str):
            raise ModelLoadError(f"{source}: {_K}model must be a string, got {type(model).__name__}")
        if model not in ("llama", "gpt2"):
            raise ModelLoadError(f"{source}: {_K}model is {model!r}; the supported tokenizers are 'llama' "
                                 "(SentencePiece) and 'gpt2' (byte-level BPE)")
        tokens = _list(metadata, "tokens", str, source, required=True)
        n = len(tokens)
        scores = _list(metadata, "scores", (int, float), source, at_least=n)
        types = _list(metadata, "token_type", int, source, at_least=n)

        def ident(key: str, default: int | None) -> int | None:
            value = metadata.get(_K + key, default)
            if value is not None and not is_integer(value):
                raise ModelLoadError(f"{source}: {_K}{key} must be an integer, got {value!r}")
            return value

        def flag(key: str, default: bool) -> bool:
            value = metadata.get(_K + key, default)
            if not isinstance(value, bool):
                raise ModelLoadError(f"{source}: {_K}{key} must be a bool, got {value!r}")
            return value

        if model == "gpt2":
            # llama.cpp's BPE defaults: BOS and EOS 11, no UNK, no space prefix, add_bos as the pre-tokenizer says.
            pre = metadata.get(_K + "pre")
            pre = pre_tokenizer(pre if isinstance(pre, str) else None, source)
            merges = _list(metadata, "merges", str, source)
            if merges is None:
                raise ModelLoadError(f"{source}: no {_K}merges key: a gpt2 tokenizer needs its merges")
            return cls(tokens, scores, types, bos_id=ident("bos_token_id", 11), eos_id=ident("eos_token_id", 11),
                       unk_id=ident("unknown_token_id", None), pad_id=ident("padding_token_id", None),
                       eot_id=ident("eot_token_id", None), add_bos=flag("add_bos_token", pre.add_bos),
                       add_eos=flag("add_eos_token", False), add_space_prefix=flag("add_space_prefix", False),
                       engine=engine, source=source, bpe=(merges, pre))
        return cls(tokens, scores, types, bos_id=ident("bos_token_id", 1), eos_id=ident("eos_token_id", 2),
                   unk_id=ident("unknown_token_id", 0), pad_id=ident("padding_token_id", None),
                   eot_id=ident("eot_token_id", None), add_bos=flag("add_bos_token", True),
                   add_eos=flag("add_eos_token", False), add_space_prefix=flag("add_space_prefix", True),
                   engine=engine, source=source)

    @classmethod
    def from_gguf(cls, file: str | os.PathLike[str] | GGUFFile, *, engine: Engine = "auto") -> Tokenizer:
        """Build from a GGUF file: a path (opened and closed here) or an open ``rlx.gguf.GGUFFile``."""
        if isinstance(file, GGUFFile):
            return cls.from_metadata(file.metadata, engine=engine, source=str(file.path))
        with gguf_open(file) as f:
            return cls.from_metadata(f.metadata, engine=engine, source=str(f.path))

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
        kind = "llama/SPM" if self._byte_level is None else "gpt2/BPE"
        return f"Tokenizer({kind}, {self.vocab_size} tokens, bos={self.bos_id}, eos={self.eos_id})"

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
        require_text(text, "encode()'s text")
        bos = self.add_bos if add_bos is None else add_bos
        eos = self.add_eos if add_eos is None else add_eos
        out: list[int] = []
        if bos:
            if self.bos_id is None:
                raise InputError("add_bos=True, but the vocabulary has no BOS token")
            out.append(self.bos_id)
        frags = self._partition(text, parse_special) if text else []
        if self._byte_level is not None:
            for frag in frags:
                out.extend((frag,) if isinstance(frag, int) else self._byte_level.encode(frag))
        else:
            self._encode_spm(frags, out)
        if eos:
            if self.eos_id is None:
                raise InputError("add_eos=True, but the vocabulary has no EOS token")
            out.append(self.eos_id)
        return out

    def _encode_spm(self, frags: list[str | int], out: list[int]) -> None:
        """The SentencePiece ids of the partitioned text: the space prefix and "▁" escapes, then the merges."""
        prev_special = True   # a space prefix goes before the first text and before text after a special token
        for k, frag in enumerate(frags):
            if isinstance(frag, str):
                frags[k] = (" " + frag if self.add_space_prefix and prev_special else frag).replace(" ", _SPACE)
            prev_special = not isinstance(frag, str)
        if self._bpe is not None:
            # One encode() per piece, not encode_batch(): pieces are few, and a batch would start tokenizers'
            # thread pool (which then warns in every forked child).
            bpe_encode = self._bpe.encode
            for frag in frags:
                if isinstance(frag, int):
                    out.append(frag)
                else:
                    ids = bpe_encode(frag, add_special_tokens=False).ids
                    out.extend(self._resolve(ids) if self._placeholders else ids)
        else:
            for frag in frags:
                if isinstance(frag, int):
                    out.append(frag)
                else:
                    self._spm(frag, out)

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

    def _resolve(self, ids: list[int]) -> list[int]:
        """Placeholder ids (characters that are no token) as byte tokens, as llama.cpp writes them."""
        n = self.vocab_size
        if all(i < n for i in ids):
            return ids
        out: list[int] = []
        for i in ids:
            if i < n:
                out.append(i)
            else:
                out.extend(self._byte_token(b) for b in self._placeholders[i].encode("utf-8"))
        return out

    def _byte_token(self, b: int) -> int:
        """The token of one fallback byte. Where the vocabulary has neither ``<0xXX>`` nor the byte itself,
        llama.cpp throws (``std::out_of_range`` out of ``byte_to_token``); here the unknown token stands in."""
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
            text = self._tokens[token_id]
            return byte_decode(text) if self._byte_level is not None else text.replace(_SPACE, " ").encode()
        if attr & _BYTE:
            return bytes((self._byte_of[token_id],))
        return b""

    def decode_bytes(self, ids: Iterable[int], *, special: bool = False) -> bytes:
        """The bytes of ``ids`` (llama.cpp's ``llama_detokenize`` with remove_special=False,
        unparse_special=``special``): the pieces joined, and, where the vocabulary adds a space prefix, one
        leading space of the first piece removed; a BPE vocabulary whose pre-tokenizer asks for it then drops
        spaces before punctuation and contractions as llama.cpp does (tokenizer_bpe.clean_spaces)."""
        out = bytearray()
        first = True
        for i in ids:
            piece = self.token_to_piece(int(i), special=special)
            if first:
                if self.add_space_prefix and piece.startswith(b" "):
                    piece = piece[1:]
                first = False
            out += piece
        return clean_spaces(bytes(out)) if self._clean_spaces else bytes(out)

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
    ``Tokenizer.decode`` of all the ids (except for the clean-up of spaces that some BPE vocabularies' decode
    does on the whole text: the stream gives the pieces as they are, as llama.cpp's token_to_piece does).
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
    allowed = {kind} if isinstance(kind, type) else set(kind)
    if not set(map(type, value)) <= allowed:    # one pass in C; exact types, so a bool is not an int here
        i, v = next((i, v) for i, v in enumerate(value) if type(v) not in allowed)
        raise ModelLoadError(f"{source}: {_K}{key}[{i}] is {v!r}, not a "
                             f"{kind.__name__ if isinstance(kind, type) else 'number'}")
    if len(value) < at_least:
        raise ModelLoadError(f"{source}: {_K}{key} has {len(value)} entries, fewer than the {at_least} tokens")
    return list(value)
