"""A small byte-level BPE vocabulary ("gpt2" tokenizer model) for the BPE
tokenizer tests: trained by the ``tokenizers`` package on the tokenizer tests'
texts, with control tokens in Llama 3's and Qwen's spelling and one
user-defined token. ``vocabulary()`` returns it as GGUF keeps it (tokens in id
order, token types, merges as "left right" strings); the fixture of the BPE
tests stores it, so the ids llama.cpp gave for it stay comparable when another
``tokenizers`` version would train a different one."""

from __future__ import annotations

from .test_tokenizer import CASES, random_texts

CONTROL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
USER_DEFINED = ["<tool_call>"]
_NORMAL, _CONTROL, _USER_DEFINED = 1, 3, 4


def vocabulary(size: int = 1200) -> dict:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=CONTROL + USER_DEFINED, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([c for c in CASES if c.strip()] * 3 + random_texts(seed=11, count=400), trainer)
    state = tok.to_str()
    import json

    model = json.loads(state)["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [_CONTROL if t in CONTROL else _USER_DEFINED if t in USER_DEFINED else _NORMAL for t in tokens]
    return {"tokens": tokens, "token_type": types, "merges": merges}


def metadata(vocab: dict, pre: str, **extra) -> dict:
    """GGUF tokenizer metadata of the vocabulary with pre-tokenizer ``pre``."""
    ids = {t: i for i, t in enumerate(vocab["tokens"])}
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": vocab["tokens"],
          "tokenizer.ggml.token_type": vocab["token_type"], "tokenizer.ggml.merges": vocab["merges"],
          "tokenizer.ggml.bos_token_id": ids["<|begin_of_text|>"], "tokenizer.ggml.eos_token_id": ids["<|eot_id|>"]}
    md.update({f"tokenizer.ggml.{k}": v for k, v in extra.items()})
    return md
