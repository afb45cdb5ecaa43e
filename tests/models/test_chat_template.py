"""rlx.models.chat_template against llama.cpp's llama_chat_apply_template: every
template rlx renders, on conversations with system turns (one, two, none, after a
user turn), whitespace around the content, empty content and unicode; the
detection of a file's Jinja template from representative templates of each
family; the defaults for files without one; a conversation continued with
keep_context on a tiny Qwen 2 file.

llama.cpp's texts are in tests/fixtures/chat_templates.json (CI needs no
llama-cpp-python) and are compared live where it is installed. The fixture is
written by this file:
    .venv/bin/python tests/models/test_chat_template.py --write-fixture
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlx.errors import InputError, UnsupportedOpError
from rlx.models.chat_template import TEMPLATES, detect, template_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates.json"
COMMAND = ".venv/bin/python tests/models/test_chat_template.py --write-fixture"


def _m(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


CONVERSATIONS = [
    [_m("user", "Hello")],
    [_m("system", "Be brief."), _m("user", " Hi there \n"), _m("assistant", "Hello!"), _m("user", "Bye")],
    [_m("system", "  One.  "), _m("system", "Two.\n"), _m("user", "Question?")],
    [_m("user", "first"), _m("system", "late system"), _m("user", "second")],
    [_m("assistant", "I speak first."), _m("user", "ok")],
    [_m("user", ""), _m("assistant", ""), _m("user", "\t\n")],
    [_m("user", "Ünïcödé 😀 中文\nline two\n\n"), _m("assistant", "  spaced reply  "), _m("user", "x")],
]

# Representative Jinja templates (shortened, their markers as the real files have them) -> rlx's name.
JINJA = {
    "qwen2.5": ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
                "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                "{%- endif %}", "chatml"),
    "llama3": ("{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
               "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
               "llama3"),
    "gemma": ("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | "
              "trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}"
              "{% endif %}", "gemma"),
    "llama2": ("{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
               "' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}", "llama2"),
    "llama2-sys": ("{% if messages[0]['role'] == 'system' %}{% set system = '<<SYS>>\\n' + messages[0]['content'] + "
                   "'\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}{{ '[INST] ' + message['content'] "
                   "+ ' [/INST]' }}{% endfor %}", "llama2-sys"),
    "mistral-v7": ("{%- if messages[0]['role'] == 'system' %}{{- '[SYSTEM_PROMPT] ' + messages[0]['content'] + "
                   "'[/SYSTEM_PROMPT]' }}{%- endif %}{%- for message in messages %}{{- '[INST] ' + "
                   "message['content'] + '[/INST]' }}{%- endfor %}", "mistral-v7"),
    "phi3": ("{% for message in messages %}{{'<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n'}}"
             "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}", "phi3"),
    "zephyr": ("{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
               "message['content'] + '<|endoftext|>' }}{% endif %}{% endfor %}", "zephyr"),
    "falcon3": ("{{ '<|user|>\\n' + message['content'] + '<|assistant|>\\n' }}", None),
    "phi4": ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
             "'<|im_end|>'}}{% endfor %}", "phi4"),
    "llama2-strip": ("{% set content = message['content'] %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
                     "llama2-sys-strip"),
    "llama2-bos": ("{% set system = '<<SYS>>\\n' + content + '\\n<</SYS>>\\n\\n' %}{{ bos_token + '[INST] ' + "
                   "message['content'] + ' [/INST]' }}", "llama2-sys-bos"),
    "mistral-v1": ("{{ bos_token }}{% for message in messages %}{{ ' [INST] ' + system_message + message['content'] "
                   "+ ' [/INST]' }}{% endfor %}", "mistral-v1"),
    "mistral-v3": ("{%- for message in messages %}{{- '[AVAILABLE_TOOLS] [' + tools + '][/AVAILABLE_TOOLS]' }}"
                   "{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endfor %}", "mistral-v3"),
    "mistral-v3-tekken": ("{%- for message in messages %}{{- '[AVAILABLE_TOOLS]' }}{{- \"[INST]\" + "
                          "message['content'] + \"[/INST]\" }}{%- endfor %}", "mistral-v3-tekken"),
    "mistral-v7-tekken": ("{{- \"[SYSTEM_PROMPT]\" + system + \"[/SYSTEM_PROMPT]\" }}[INST]", "mistral-v7"),
    "falcon3-glm": ("{{ '<|user|>\\n' + message['content'] + '</s>' + '<|assistant|>\\n' }}", "falcon3"),
    "plain": ("{% for message in messages %}{{ message['content'] }}{% endfor %}", None),
}


# ---------------------------------------------------------------------------------------------------- llama.cpp


def llama_cpp_render(template: str, messages: list[dict[str, str]]) -> str | None:
    """llama.cpp's rendering (add_ass on) by a built-in name or a Jinja template it detects; None: refused."""
    import ctypes

    import llama_cpp

    arr = (llama_cpp.llama_chat_message * len(messages))()
    keep = []
    for i, m in enumerate(messages):
        role, content = m["role"].encode(), m["content"].encode()
        keep += [role, content]
        arr[i].role, arr[i].content = role, content
    size = 4096
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(template.encode(), arr, len(messages), True, buf, size)
        if n < 0:
            return None
        if n <= size:
            return buf.raw[:n].decode()
        size = n


def _expected() -> dict:
    return {
        "templates": {name: [llama_cpp_render(name, c) for c in CONVERSATIONS] for name in TEMPLATES},
        "jinja": {key: llama_cpp_render(jinja, CONVERSATIONS[1]) for key, (jinja, _) in JINJA.items()},
    }


def write_fixture() -> None:
    import llama_cpp

    FIXTURE.write_text(json.dumps({"llama_cpp_python": llama_cpp.__version__, **_expected()}, indent=1,
                                  ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")


@pytest.fixture(scope="module")
def expected():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_template_renders_as_llama_cpp_does(name, expected):
    want = expected["templates"][name]
    assert [TEMPLATES[name].render(c) for c in CONVERSATIONS] == want


@pytest.mark.parametrize("key", JINJA)
def test_detection_of_a_files_jinja_template(key, expected):
    jinja, name = JINJA[key]
    assert detect(jinja) == name
    if name is not None:   # what llama.cpp renders from the same Jinja text
        assert TEMPLATES[name].render(CONVERSATIONS[1]) == expected["jinja"][key]


def test_the_fixture_is_llama_cpp_live(expected):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: the fixture stands in for it")
    assert _expected() == {k: expected[k] for k in ("templates", "jinja")}, f"stale fixture: {COMMAND}"


def test_defaults_and_choices():
    assert template_for({}, "gemma3").name == "gemma"
    assert template_for({}, "qwen2").name == "chatml" and template_for({}, "llama").name == "chatml"
    assert template_for({"tokenizer.chat_template": JINJA["llama3"][0]}, "llama").name == "llama3"
    assert template_for({"tokenizer.chat_template": JINJA["llama3"][0]}, "llama", "phi3").name == "phi3"
    with pytest.raises(UnsupportedOpError, match="not one rlx recognizes; pass template="):
        template_for({"tokenizer.chat_template": JINJA["plain"][0]}, "llama")
    with pytest.raises(UnsupportedOpError, match="'vicuna' is not one rlx renders"):
        template_for({}, "llama", "vicuna")


@pytest.mark.parametrize("messages, match", [
    ("hi", "must be a list"), ({"role": "user"}, "must be a list"), (["hi"], "each message must be a dict"),
    ([_m("robot", "x")], "role must be"), ([{"role": "user", "content": 3}], "content must be a string"),
])
def test_bad_messages(messages, match):
    for template in TEMPLATES.values():
        with pytest.raises(InputError, match=match):
            template.render(messages)


def test_chat_on_a_qwen2_file_continues_the_conversation(tmp_path):
    """LLM.chat in chatml (the qwen2 default): the prompt is the rendered conversation, and a next turn
    with keep_context leaves the cache holding the whole conversation, the reply closed by <|im_end|>."""
    from rlx.models.llm import LLM

    from .tiny_llm import write_tiny_decoder

    llm = LLM(write_tiny_decoder(tmp_path / "qwen2.gguf", "qwen2"), max_context=256)
    first = [_m("user", "the quick fox")]
    assert llm.chat_prompt(first) == TEMPLATES["chatml"].render(first)
    reply = "".join(llm.chat(first, max_tokens=5))
    assert llm.stats.generated_tokens == 5 and llm.stats.finish_reason == "length"
    before = list(llm.context)
    "".join(llm.chat([_m("user", "a lazy dog")], keep_context=True, max_tokens=3))
    # The new turn: the reply closed (it stopped early, so <|im_end|> is written), then "\n" and the turn.
    added = llm.tokenizer.encode("<|im_end|>\n" + TEMPLATES["chatml"].render([_m("user", "a lazy dog")]),
                                 add_bos=False)
    assert llm.context[:len(before) + 1 + len(added)] == before + [llm.context[len(before)]] + added
    assert reply == llm.tokenizer.decode(llm.context[len(before) - 4:len(before) + 1])


def test_cli_and_server_take_a_template_by_name(tmp_path, capsys):
    from rlx.cli import main
    from rlx.errors import ConfigError
    from rlx.serve.limits import ServeConfig

    from .tiny_llm import write_tiny_decoder

    path = write_tiny_decoder(tmp_path / "llama.gguf", "llama")
    assert main(["generate", "the quick fox", "--model", str(path), "--max-tokens", "3", "--max-context", "256",
                 "--chat-template", "llama3"]) == 0
    assert "prompt tokens" in capsys.readouterr().err
    assert ServeConfig(chat_template="phi3").chat_template == "phi3"
    with pytest.raises(ConfigError, match="chat_template must be one of"):
        ServeConfig(chat_template="vicuna")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-fixture"]:
        write_fixture()
    else:
        sys.exit(f"usage: {COMMAND}")
