"""The byte-level BPE side of rlx.tokenizer: GGUF's "gpt2" tokenizer model
(Llama 3 and 4, Qwen 2/3, Mistral's Tekken, DeepSeek V3, SmolLM and the other GPT-2-style vocabularies), id for id
with llama.cpp (``src/llama-vocab.cpp``: ``llm_tokenizer_bpe_session``,
``llama_decode_text``, ``detokenize``'s clean-up of spaces).

A text fragment (what is left between special tokens) is split by the
pre-tokenizer's regular expressions, each applied in turn to the pieces of the
one before (matches and the text between them both kept), each piece's UTF-8
bytes are written in GPT-2's byte alphabet (every byte a printable character)
and merged by the ranks of ``tokenizer.ggml.merges``; with ``ignore_merges``
(Llama 3) a piece that is a token as a whole is taken as it is. The
``tokenizers`` package does all of that (a ``Split`` per expression, a
``ByteLevel`` alphabet and its ``BPE`` model): the pre-tokenizer names llama.cpp
knows map to its expressions here, and an unknown name is refused rather than
split some other way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlx.errors import ModelLoadError

__all__ = ["PRE_TOKENIZERS", "PreTokenizer", "BpeEngine", "byte_decode", "clean_spaces", "pre_tokenizer"]

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Mistral's Tekken and OpenAI's o200k (GPT-4o, Llama 4) as llama.cpp rewrites them: its engine has no
# \p{Lu} / \p{Ll} classes, so "an upper-case letter" is a letter that is not a-z and "a lower-case one" a
# letter that is not A-Z (which differs from the originals for letters outside ASCII: llama.cpp's ids are
# the ones matched here).
_UPPER, _LOWER = r"((?=[\p{L}])([^a-z]))", r"((?=[\p{L}])([^A-Z]))"
_TEKKEN = (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*|\p{{N}}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_O200K = (rf"[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTIONS}?|[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*"
          rf"{_CONTRACTIONS}?|\p{{N}}{{1,3}}| ?[^\s\p{{L}}\p{{N}}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_DEEPSEEK3 = (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
              r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
              r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class PreTokenizer:
    """One of llama.cpp's BPE pre-tokenizer types: its expressions and the flags it sets."""

    regexes: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False          # the default where the file has no tokenizer.ggml.add_bos_token
    clean_spaces: bool = True      # detokenize drops the space before ?!., and some apostrophes


_LLAMA3_PRE = PreTokenizer((_LLAMA3,), ignore_merges=True, add_bos=True)
_QWEN2_PRE = PreTokenizer((_QWEN2,), clean_spaces=False)
_GPT2_PRE = PreTokenizer((_GPT2,))
_DIGITS_GPT2 = (r"\p{N}", _GPT2)

# tokenizer.ggml.pre -> its pre-tokenizer (llama.cpp's llama_vocab::impl::load and llm_tokenizer_bpe).
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"), _LLAMA3_PRE),
    **dict.fromkeys(("dbrx", "smaug-bpe"), PreTokenizer((_LLAMA3,))),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), _QWEN2_PRE),
    "stablelm2": PreTokenizer((_QWEN2,)),
    **dict.fromkeys(("gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais",
                     "exaone4"), _GPT2_PRE),
    **dict.fromkeys(("starcoder", "refact", "codeshell", "exaone", "minerva-7b"), PreTokenizer(_DIGITS_GPT2)),
    **dict.fromkeys(("smollm", "command-r"), PreTokenizer(_DIGITS_GPT2, clean_spaces=False)),
    "tekken": PreTokenizer((_TEKKEN,), ignore_merges=True, add_bos=True, clean_spaces=False),
    **dict.fromkeys(("gpt-4o", "llama4"), PreTokenizer((_O200K,), clean_spaces=False)),
    "deepseek-v3": PreTokenizer(_DEEPSEEK3, clean_spaces=False),
}


def pre_tokenizer(name: str | None, source: str) -> PreTokenizer:
    if name is None:
        raise ModelLoadError(f"{source}: tokenizer.ggml.pre is missing: a gpt2 tokenizer needs its pre-tokenizer "
                             "(llama.cpp falls back to a 'default' split that degrades generation)")
    pre = PRE_TOKENIZERS.get(name)
    if pre is None:
        raise ModelLoadError(f"{source}: tokenizer.ggml.pre is {name!r}, a pre-tokenizer rlx does not know "
                             f"(known: {', '.join(sorted(PRE_TOKENIZERS))})")
    return pre


def _byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest for U+0100 onwards in order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


BYTE_CHARS = _byte_alphabet()
_BYTE_OF = {c: b for b, c in enumerate(BYTE_CHARS)}


def byte_decode(text: str) -> bytes:
    """A token's bytes from its byte-alphabet text (llama_decode_text); a character outside the alphabet
    comes out as llama.cpp writes it: "[UNK_BYTE_0x<its UTF-8 in hex><the token's text>]"."""
    out = bytearray()
    for ch in text:
        b = _BYTE_OF.get(ch)
        if b is None:
            out += b"[UNK_BYTE_0x" + ch.encode().hex().encode() + text.encode() + b"]"
        else:
            out.append(b)
    return bytes(out)


def clean_spaces(text: bytes) -> bytes:
    """llama.cpp's detokenize clean-up for vocabularies that ask for it: no space before ? ! . , ; a lone
    apostrophe between spaces loses both; no space before 's 'm 're 've."""
    def first(t: bytearray) -> bytearray:
        out = t[:1]
        for i in range(1, len(t)):
            if t[i - 1] == 0x20 and t[i] in b"?!.,":
                out.pop()
            out.append(t[i])
        return out

    def second(t: bytearray) -> bytearray:
        out, i = t[:1], 1
        while i < len(t):
            x = t[i]
            if x == 0x27 and i + 1 < len(t) and t[i - 1] == 0x20 and t[i + 1] == 0x20:
                out.pop()
                out.append(x)
                i += 2          # the space after it goes too
                continue
            out.append(x)
            i += 1
        return out

    def third(t: bytearray) -> bytearray:
        out = t[:1]
        for i in range(1, len(t)):
            x = t[i]
            if t[i - 1] == 0x20 and x == 0x27 and i + 1 < len(t):
                x1 = t[i + 1]
                if x1 in b"sm" or (i + 2 < len(t) and bytes(t[i + 1:i + 3]) in (b"re", b"ve")):
                    out.pop()
            out.append(x)
        return out

    return bytes(third(second(first(bytearray(text)))))


class BpeEngine:
    """The ``tokenizers`` pipeline for one vocabulary: encode(text) -> ids of one fragment."""

    def __init__(self, tokens: Sequence[str], to_id: dict[str, int], merges: Sequence[str], pre: PreTokenizer,
                 source: str) -> None:
        from tokenizers import Regex, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        pairs = []
        for i, m in enumerate(merges):
            cut = m.find(" ", 1)   # as llama.cpp splits a merge (a first part may itself start with a space)
            if cut < 0:
                raise ModelLoadError(f"{source}: tokenizer.ggml.merges[{i}] is {m!r}, not two parts separated "
                                     "by a space")
            pairs.append((m[:cut], m[cut + 1:]))
        # tokenizers needs each merge's parts and result in the vocabulary (llama.cpp would merge such a pair
        # and then write the symbol as byte tokens): a merge that makes no token is refused.
        for i, (a, b) in enumerate(pairs):
            if a not in to_id or b not in to_id or a + b not in to_id:
                raise ModelLoadError(f"{source}: tokenizer.ggml.merges[{i}] joins {a!r} and {b!r}, but "
                                     f"{next(t for t in (a, b, a + b) if t not in to_id)!r} is no token")
        missing = [c for c in BYTE_CHARS if c not in to_id]
        if missing:
            raise ModelLoadError(f"{source}: {len(missing)} bytes of the byte alphabet have no token (the first: "
                                 f"{missing[0]!r}); rlx's BPE needs all 256")
        model = models.BPE(dict(to_id), pairs, ignore_merges=pre.ignore_merges)
        tok = HFTokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in pre.regexes]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        self._tok: Any = tok

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids
