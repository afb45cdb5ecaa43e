"""rlx.tokenizer on byte-level BPE vocabularies (GGUF's "gpt2" tokenizer model:
Llama 3, Qwen, SmolLM) against llama.cpp: a small vocabulary trained by
``tokenizers`` (tests/models/tiny_bpe.py) under several pre-tokenizers, every
text of the SPM tests plus random mixes of scripts, whitespace, emoji and
special-token strings, encoded with and without BOS and special-token parsing,
and decoded. llama.cpp's ids and texts are in tests/fixtures/bpe_tokens.json
(with the vocabulary itself); where llama-cpp-python is installed, more random
texts are compared live. Measured here before the fixture was written: 4,061
texts x 4 modes x 7 pre-tokenizers and 3,061 x 4 x 4 more (tekken, gpt-4o,
llama4, deepseek-v3), all equal to llama-cpp-python 0.3.36.

The fixture is written by this file:
    .venv/bin/python tests/models/test_tokenizer_bpe.py --write-fixture
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlx.errors import ConfigError, ModelLoadError
from rlx.tokenizer import Tokenizer

if __package__:
    from . import tiny_bpe
    from .test_tokenizer import CASES, _llama, _llama_detokenize, _llama_ids, _modes, _write_gguf, random_texts
else:   # run as a script (--write-fixture)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.models import tiny_bpe
    from tests.models.test_tokenizer import (
        CASES,
        _llama,
        _llama_detokenize,
        _llama_ids,
        _modes,
        _write_gguf,
        random_texts,
    )

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bpe_tokens.json"
COMMAND = ".venv/bin/python tests/models/test_tokenizer_bpe.py --write-fixture"
PRES = ("llama-bpe", "qwen2", "gpt-2", "smollm", "tekken", "gpt-4o")
TEXTS = CASES + random_texts(seed=4242, count=60) + [
    "I'm sure it's you're we've they'll he'd DON'T", "a , b . c ! d ? e ' f 's 'm 're 've 'll 'd 't",
    "12345678 x 3.14159", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<tool_call>{}</tool_call>",
]
FIXTURE_MODES = ((True, True), (False, False))   # llama.cpp's (add_special, parse_special)


def write_fixture() -> None:
    import tempfile

    import llama_cpp

    vocab = tiny_bpe.vocabulary()
    out = {"llama_cpp_python": llama_cpp.__version__, "vocabulary": vocab, "pre": {}}
    with tempfile.TemporaryDirectory() as folder:
        for pre in PRES:
            llama = _llama(_write_gguf(Path(folder) / f"{pre}.gguf", tiny_bpe.metadata(vocab, pre)))
            cases = []
            for text in TEXTS:
                ids = {f"{a:d}{p:d}": _llama_ids(llama, text, a, p) for a, p in FIXTURE_MODES}
                cases.append({"text": text, "ids": ids,
                              "decoded": _llama_detokenize(llama, ids["11"], False).hex()})
            out["pre"][pre] = cases
    FIXTURE.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")


@pytest.fixture(scope="module")
def fixture():
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert [c["text"] for c in data["pre"][PRES[0]]] == TEXTS, f"the texts changed: {COMMAND}"
    return data


@pytest.mark.parametrize("pre", PRES)
def test_fixture_texts_encode_and_decode_as_llama_cpp(fixture, pre):
    tok = Tokenizer.from_metadata(tiny_bpe.metadata(fixture["vocabulary"], pre))
    assert tok.model == "gpt2" and tok.engine == "tokenizers"
    for case in fixture["pre"][pre]:
        for add, parse in FIXTURE_MODES:
            kwargs = dict(add_bos=None if add else False, add_eos=None if add else False, parse_special=parse)
            assert tok.encode(case["text"], **kwargs) == case["ids"][f"{add:d}{parse:d}"], (pre, case["text"])
        assert tok.decode_bytes(case["ids"]["11"]) == bytes.fromhex(case["decoded"]), (pre, case["text"])


def test_bos_and_cleanup_follow_the_pre_tokenizer(fixture):
    vocab = fixture["vocabulary"]
    llama3 = Tokenizer.from_metadata(tiny_bpe.metadata(vocab, "llama-bpe"))
    qwen = Tokenizer.from_metadata(tiny_bpe.metadata(vocab, "qwen2"))
    assert llama3.add_bos and not qwen.add_bos            # llama.cpp's defaults without add_bos_token
    assert Tokenizer.from_metadata(tiny_bpe.metadata(vocab, "qwen2", add_bos_token=True)).add_bos
    ids = llama3.encode("Hello , world .", add_bos=False)
    assert llama3.decode(ids) == "Hello, world."          # llama3 cleans spaces on decode, qwen2 does not
    assert qwen.decode(qwen.encode("Hello , world .")) == "Hello , world ."
    stream = llama3.decode_stream()
    assert "".join(stream.push(i) for i in ids) == "Hello , world ."   # pieces as they are
    eot = llama3.token_to_id("<|eot_id|>")
    assert llama3.is_eog(eot) and llama3.is_control(eot) and llama3.decode([eot]) == ""
    assert llama3.decode([eot], special=True) == "<|eot_id|>"


@pytest.mark.parametrize("change, match", [
    (dict(pre="no-such-pre"), "tokenizer.ggml.pre is 'no-such-pre', a pre-tokenizer rlx does not know"),
    (dict(pre=None), "tokenizer.ggml.pre is missing"),
    (dict(merges=None), "no tokenizer.ggml.merges key"),
    (dict(merges=["nospace"]), r"merges\[0\] is 'nospace', not two parts"),
    (dict(merges=["Ġ zzzz"]), r"merges\[0\] joins 'Ġ' and 'zzzz', but 'zzzz' is no token"),
    (dict(drop="Ā"), "bytes of the byte alphabet have no token"),
])
def test_bad_bpe_metadata(fixture, change, match):
    vocab = dict(fixture["vocabulary"])
    if "drop" in change:
        at = vocab["tokens"].index(change["drop"])
        vocab = {**vocab, "tokens": vocab["tokens"][:at] + ["<dropped>"] + vocab["tokens"][at + 1:],
                 "merges": [m for m in vocab["merges"] if change["drop"] not in m]}
    md = tiny_bpe.metadata(vocab, "llama-bpe")
    for key in ("pre", "merges"):
        if key in change:
            if change[key] is None:
                del md[f"tokenizer.ggml.{key}"]
            else:
                md[f"tokenizer.ggml.{key}"] = change[key]
    with pytest.raises(ModelLoadError, match=match):
        Tokenizer.from_metadata(md)


def test_the_python_engine_is_spm_only(fixture):
    with pytest.raises(ConfigError, match="python engine is SentencePiece's"):
        Tokenizer.from_metadata(tiny_bpe.metadata(fixture["vocabulary"], "qwen2"), engine="python")


@pytest.mark.parametrize("pre", ("llama-bpe", "qwen2", "gpt-2", "smollm", "starcoder", "dbrx", "stablelm2", "tekken",
                                 "gpt-4o", "llama4", "deepseek-v3"))
def test_live_against_llama_cpp(tmp_path, fixture, pre):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: the fixture stands in for it")
    path = _write_gguf(tmp_path / f"{pre}.gguf", tiny_bpe.metadata(fixture["vocabulary"], pre))
    llama, tok = _llama(path), Tokenizer.from_gguf(path)
    for text in TEXTS + random_texts(seed=99, count=150):
        for add, parse, kwargs in _modes():
            ref = _llama_ids(llama, text, add, parse)
            assert tok.encode(text, **kwargs) == ref, (pre, text, add, parse)
            for special in (False, True):
                assert tok.decode_bytes(ref, special=special) == _llama_detokenize(llama, ref, special), text


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-fixture"]:
        write_fixture()
    else:
        sys.exit(f"usage: {COMMAND}")
