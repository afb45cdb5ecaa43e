"""Chat templates: a conversation rendered as the model was tuned to read it.

GGUF files carry their template as Jinja (``tokenizer.chat_template``). Like
llama.cpp (``src/llama-chat.cpp``: ``llm_chat_detect_template`` and
``llm_chat_apply_template``), rlx recognizes the common templates by their
marker strings and renders them in code, so no Jinja engine runs; the text
equals llama.cpp's for the same conversation (tests/models/test_chat_template.py
checks every template against llama-cpp-python's ``llama_chat_apply_template``).

    template = template_for(gguf_metadata, "qwen2")     # the file's, else the architecture's default
    prompt = template.render([{"role": "user", "content": "Hi"}])

A file without a template gets its architecture's (Gemma 3 270M's GGUF has
none: "gemma"), otherwise llama.cpp's default, "chatml". A template rlx does
not recognize raises ``UnsupportedOpError``; ``LLM.chat(template=NAME)``
names one instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlx.errors import InputError, UnsupportedOpError

Messages = Sequence[Mapping[str, str]]
_Turns = list[tuple[str, str]]

# Whitespace llama.cpp's trim() strips (C isspace).
_SPACE = " \t\n\v\f\r"


def _trim(s: str) -> str:
    return s.strip(_SPACE)


def _render_chatml(turns: _Turns) -> str:
    return "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns) + \
        "<|im_start|>assistant\n"


def _render_llama3(turns: _Turns) -> str:
    return "".join(f"<|start_header_id|>{role}<|end_header_id|>\n\n{_trim(content)}<|eot_id|>"
                   for role, content in turns) + "<|start_header_id|>assistant<|end_header_id|>\n\n"


def _render_gemma(turns: _Turns) -> str:
    # Gemma has no system turn: system text opens the next user (non-model) turn.
    out, system = [], ""
    for role, content in turns:
        if role == "system":
            system += _trim(content)
            continue
        role = "model" if role == "assistant" else role
        out.append(f"<start_of_turn>{role}\n")
        if system and role != "model":
            out.append(system + "\n\n")
            system = ""
        out.append(_trim(content) + "<end_of_turn>\n")
    return "".join(out) + "<start_of_turn>model\n"


def _llama2(system_tags: bool = True, bos_inside: bool = False, strip: bool = False) -> Callable[[_Turns], str]:
    """Llama 2's [INST] turns; system_tags: the system text in <<SYS>> tags (else a plain line); bos_inside:
    "<s>" opens every turn after the first; strip: the contents trimmed."""
    def render(turns: _Turns) -> str:
        out, inside = ["[INST] "], True
        for role, content in turns:
            content = _trim(content) if strip else content
            if not inside:
                inside = True
                out.append("<s>[INST] " if bos_inside else "[INST] ")
            if role == "system":
                out.append(f"<<SYS>>\n{content}\n<</SYS>>\n\n" if system_tags else content + "\n")
            elif role == "user":
                out.append(content + " [/INST]")
            else:
                out.append(content + "</s>")
                inside = False
        return "".join(out)
    return render


def _mistral(leading: str, trailing: str, trim_reply: bool) -> Callable[[_Turns], str]:
    """Mistral's v1 / v3 / v3-tekken [INST] turns (the system text a paragraph of the turn)."""
    def render(turns: _Turns) -> str:
        out, inside = [], False
        for role, content in turns:
            if not inside:
                out.append(f"{leading}[INST]{trailing}")
                inside = True
            if role == "system":
                out.append(content + "\n\n")
            elif role == "user":
                out.append(f"{content}{leading}[/INST]")
            else:
                out.append(f"{trailing}{_trim(content) if trim_reply else content}</s>")
                inside = False
        return "".join(out)
    return render


def _mistral_v7(space: str) -> Callable[[_Turns], str]:
    """Mistral's v7 turns ([SYSTEM_PROMPT], [INST]); ``space`` after each tag ("" for v7-tekken)."""
    def render(turns: _Turns) -> str:
        out = []
        for role, content in turns:
            if role == "system":
                out.append(f"[SYSTEM_PROMPT]{space}{content}[/SYSTEM_PROMPT]")
            elif role == "user":
                out.append(f"[INST]{space}{content}[/INST]")
            else:
                out.append(f"{space}{content}</s>")
        return "".join(out)
    return render


def _tagged(end: str) -> Callable[[_Turns], str]:
    """<|role|> turns closed by ``end`` (Phi 3: "<|end|>\\n", Zephyr: "<|endoftext|>\\n", Falcon 3: "\\n")."""
    def render(turns: _Turns) -> str:
        return "".join(f"<|{role}|>\n{content}{end}" for role, content in turns) + "<|assistant|>\n"
    return render


def _render_phi4(turns: _Turns) -> str:
    return "".join(f"<|im_start|>{role}<|im_sep|>{content}<|im_end|>" for role, content in turns) + \
        "<|im_start|>assistant<|im_sep|>"


@dataclass(frozen=True)
class ChatTemplate:
    """One template: ``render`` gives the conversation with the assistant's turn open (except the [INST]
    templates, whose open turn is the user's closed one, as llama.cpp renders them). ``end_of_turn`` closes
    an assistant reply that stopped before the model closed it; ``after_turn`` follows a closed reply
    before the next turn (a conversation continued with ``keep_context``)."""

    name: str
    _render: Callable[[_Turns], str]
    end_of_turn: str
    after_turn: str

    def render(self, messages: Messages) -> str:
        return self._render(_turns(messages))


TEMPLATES: dict[str, ChatTemplate] = {t.name: t for t in (
    ChatTemplate("chatml", _render_chatml, "<|im_end|>", "\n"),
    ChatTemplate("llama3", _render_llama3, "<|eot_id|>", ""),
    ChatTemplate("gemma", _render_gemma, "<end_of_turn>", "\n"),
    ChatTemplate("llama2", _llama2(system_tags=False), "</s>", ""),
    ChatTemplate("llama2-sys", _llama2(), "</s>", ""),
    ChatTemplate("llama2-sys-bos", _llama2(bos_inside=True), "</s>", ""),
    ChatTemplate("llama2-sys-strip", _llama2(strip=True), "</s>", ""),
    ChatTemplate("mistral-v1", _mistral(" ", " ", trim_reply=False), "</s>", ""),
    ChatTemplate("mistral-v3", _mistral("", " ", trim_reply=True), "</s>", ""),
    ChatTemplate("mistral-v3-tekken", _mistral("", "", trim_reply=False), "</s>", ""),
    ChatTemplate("mistral-v7", _mistral_v7(" "), "</s>", ""),
    ChatTemplate("mistral-v7-tekken", _mistral_v7(""), "</s>", ""),
    ChatTemplate("phi3", _tagged("<|end|>\n"), "<|end|>", "\n"),
    ChatTemplate("phi4", _render_phi4, "<|im_end|>", ""),
    ChatTemplate("falcon3", _tagged("\n"), "", ""),
    ChatTemplate("zephyr", _tagged("<|endoftext|>\n"), "<|endoftext|>", "\n"),
)}

# Architectures whose files may carry no template, and the one their models were tuned with.
_ARCHITECTURE_DEFAULTS = {"gemma3": "gemma", "gemma2": "gemma"}
_DEFAULT = "chatml"   # llama.cpp's, for a model without a template


def detect(jinja: str) -> str | None:
    """The name of the template a Jinja chat template is, by its markers (llama.cpp's detection order for
    the templates rlx renders), or None."""
    if "<|im_start|>" in jinja:
        if "<|im_sep|>" in jinja:
            return "phi4"
        return None if "<end_of_utterance>" in jinja else "chatml"
    if jinja.startswith("mistral") or "[INST]" in jinja:
        if "[SYSTEM_PROMPT]" in jinja:
            return "mistral-v7"   # llama.cpp's rule too: v7-tekken only by name
        if "' [INST] ' + system_message" in jinja or "[AVAILABLE_TOOLS]" in jinja:
            if " [INST]" in jinja:
                return "mistral-v1"
            return "mistral-v3-tekken" if '"[INST]"' in jinja else "mistral-v3"
        if "content.strip()" in jinja:
            return "llama2-sys-strip"
        if "bos_token + '[INST]" in jinja:
            return "llama2-sys-bos"
        return "llama2-sys" if "<<SYS>>" in jinja else "llama2"
    if "<|assistant|>" in jinja and "<|end|>" in jinja:
        return "phi3"
    if "[gMASK]<sop>" in jinja:
        return None
    if "<|assistant|>" in jinja and "<|user|>" in jinja:
        return "falcon3" if "</s>" in jinja else None   # else GLM-Edge
    if "<|user|>" in jinja and "<|endoftext|>" in jinja:
        return "zephyr"
    if "<start_of_turn>" in jinja:
        return "gemma"
    if "<|start_header_id|>" in jinja and "<|end_header_id|>" in jinja:
        return "llama3"
    return None


def template_for(metadata: Mapping[str, Any], architecture: str, name: str | None = None) -> ChatTemplate:
    """The template ``name`` if given, else the file's (``tokenizer.chat_template``), else the
    architecture's default. UnsupportedOpError names a template rlx does not render."""
    if name is not None:
        if name not in TEMPLATES:
            raise UnsupportedOpError(f"chat template {name!r} is not one rlx renders ({', '.join(TEMPLATES)})")
        return TEMPLATES[name]
    jinja = metadata.get("tokenizer.chat_template")
    if not isinstance(jinja, str) or not jinja.strip():
        return TEMPLATES[_ARCHITECTURE_DEFAULTS.get(architecture, _DEFAULT)]
    found = detect(jinja)
    if found is None:
        raise UnsupportedOpError(f"the model's chat template (tokenizer.chat_template, {len(jinja)} characters) is "
                                 f"not one rlx recognizes; pass template= one of {', '.join(TEMPLATES)}")
    return TEMPLATES[found]


def _turns(messages: Messages) -> _Turns:
    """(role, content) pairs of OpenAI-style messages; InputError names what is wrong."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InputError(f"chat: messages must be a list of {{'role': ..., 'content': ...}} dicts, "
                         f"got {type(messages).__name__}")
    turns = []
    for m in messages:
        if not isinstance(m, Mapping):
            raise InputError(f"chat: each message must be a dict with 'role' and 'content', got {type(m).__name__}")
        role, content = m.get("role"), m.get("content", "")
        if not isinstance(content, str):
            raise InputError(f"chat: a message's content must be a string, got {type(content).__name__}")
        if role not in ("system", "user", "assistant"):
            raise InputError(f"chat: role must be system, user or assistant, got {role!r}")
        turns.append((role, content))
    return turns


__all__ = ["ChatTemplate", "TEMPLATES", "detect", "template_for"]
