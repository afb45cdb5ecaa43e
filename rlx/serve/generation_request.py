"""Validation of POST /v1/completions and /v1/chat/completions bodies.

OpenAI's fields (``model``, ``prompt`` / ``messages``, ``max_tokens`` and
chat's ``max_completion_tokens``, ``temperature``, ``top_p``, ``seed``,
``stop``, ``stream``, ``stream_options``, ``n``) and llama-server's
sampling extensions (``top_k``, ``min_p``, ``repeat_penalty`` or
``repetition_penalty``). A field this server cannot honour (``n`` above 1,
``logprobs``, ``echo``, ``best_of`` above 1, ``suffix``, non-zero
``presence_penalty`` / ``frequency_penalty``, tools) is refused with a 400
naming it rather than ignored; other unknown fields are ignored, as
OpenAI's own clients send some by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlx.arg_types import is_integer, is_real
from rlx.models.sampling import positive_in_f32
from rlx.serve.limits import ApiError, ServeConfig, json_type, names_for

MAX_STOP_STRINGS = 4          # OpenAI's limit
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class GenerationRequest:
    """A validated request: the prompt text (chat: the messages as given,
    rendered later by the model's template) and the ``LLM.generate``
    keyword arguments."""

    chat: bool
    prompt: str = ""
    messages: tuple[Mapping[str, str], ...] = ()
    max_tokens: int | None = None       # None: up to the cap and the context's end
    options: dict[str, Any] = field(default_factory=dict)   # temperature, top_k, top_p, min_p, ...
    stream: bool = False
    include_usage: bool = False          # stream_options.include_usage: a last chunk with usage


def parse_generation_request(body: object, config: ServeConfig, chat: bool) -> GenerationRequest:
    """Validate a decoded JSON body; raises ApiError (400, or 404 for an unknown model)."""
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {json_type(body)}")
    model = body.get("model", config.llm_name)
    if not isinstance(model, str):
        raise ApiError(f"'model' must be a string, got a {json_type(model)}", param="model", code="invalid_type")
    if model not in names_for(config.llm_name):
        raise ApiError(f"model {model!r} is not served here (this server generates with {config.llm_name!r})",
                       status=404, param="model", code="model_not_found")
    _refuse_unsupported(body, chat)
    if chat:
        messages = _messages(body)
        prompt = ""
        size = sum(len(m["content"]) for m in messages)
    else:
        messages = ()
        prompt = _prompt(body)
        size = len(prompt)
    if size > config.max_prompt_chars:
        raise ApiError(f"the prompt has {size} characters; at most {config.max_prompt_chars}", status=413,
                       param="messages" if chat else "prompt", code="prompt_too_long")
    max_tokens = _max_tokens(body, config, chat)
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise ApiError("'stream_options' is only allowed with 'stream': true", param="stream_options",
                           code="invalid_value")
        if not isinstance(options, dict):
            raise ApiError(f"'stream_options' must be an object, got a {json_type(options)}",
                           param="stream_options", code="invalid_type")
        include_usage = _bool(options, "include_usage", False)
    return GenerationRequest(chat=chat, prompt=prompt, messages=messages, max_tokens=max_tokens,
                             options=_sampling(body), stream=stream, include_usage=include_usage)


def _refuse_unsupported(body: Mapping[str, Any], chat: bool) -> None:
    n = body.get("n")
    if n is not None and (not is_integer(n) or n != 1):
        raise ApiError(f"'n' must be 1 (one choice per request), got {n!r}", param="n", code="unsupported_value")
    best_of = body.get("best_of")
    if best_of is not None and (isinstance(best_of, bool) or best_of != 1):
        raise ApiError(f"'best_of' must be 1, got {best_of!r}", param="best_of", code="unsupported_value")
    for name in ("logprobs", "top_logprobs", "echo", "suffix", "tools", "functions", "logit_bias"):
        if body.get(name) not in (None, False, {}, []):
            raise ApiError(f"'{name}' is not supported by this server", param=name, code="unsupported_parameter")
    for name in ("presence_penalty", "frequency_penalty"):
        value = body.get(name)
        if value is not None and not is_real(value, finite=False):
            raise ApiError(f"'{name}' must be a number, got a {json_type(value)}", param=name, code="invalid_type")
        if value:
            raise ApiError(f"'{name}' is not supported (use 'repetition_penalty'); only 0 is accepted", param=name,
                           code="unsupported_value")


def _prompt(body: Mapping[str, Any]) -> str:
    if "prompt" not in body:
        raise ApiError("'prompt' is required", param="prompt", code="missing_prompt")
    raw = body["prompt"]
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
        raw = raw[0]
    if not isinstance(raw, str):
        # OpenAI also takes token-id arrays and batches of prompts; this server does one text prompt.
        shape = f"a list of {len(raw)} items" if isinstance(raw, list) else f"a {json_type(raw)}"
        raise ApiError(f"'prompt' must be a string (or a list of exactly one string), got {shape}",
                       param="prompt", code="invalid_type")
    return raw


def _messages(body: Mapping[str, Any]) -> tuple[dict[str, str], ...]:
    if "messages" not in body:
        raise ApiError("'messages' is required", param="messages", code="missing_messages")
    raw = body["messages"]
    if not isinstance(raw, list) or not raw:
        raise ApiError(f"'messages' must be a non-empty list, got {json_type(raw)}", param="messages",
                       code="invalid_type")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise ApiError(f"'messages[{i}]' must be an object, got a {json_type(m)}", param="messages",
                           code="invalid_type")
        role = m.get("role")
        if not isinstance(role, str) or role not in CHAT_ROLES:   # a list or object is not hashable
            raise ApiError(f"'messages[{i}].role' must be one of {', '.join(CHAT_ROLES)}, got {role!r}",
                           param="messages", code="invalid_value")
        out.append({"role": CHAT_ROLES[role], "content": _content(m.get("content"), i)})
    return tuple(out)


def _content(content: object, i: int) -> str:
    """A message's text: a string, or OpenAI's list of {"type": "text", "text": ...} parts (joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ApiError(f"'messages[{i}].content' parts must be {{\"type\": \"text\", \"text\": ...}} "
                               "(text only)", param="messages", code="invalid_type")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(f"'messages[{i}].content' must be a string or a list of text parts, got a {json_type(content)}",
                   param="messages", code="invalid_type")


def _max_tokens(body: Mapping[str, Any], config: ServeConfig, chat: bool) -> int | None:
    name = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    value = body.get(name)
    if value is None:
        return None
    if not is_integer(value) or value < 1:
        raise ApiError(f"'{name}' must be an integer >= 1, got {value!r}", param=name, code="invalid_value")
    if value > config.max_tokens:
        raise ApiError(f"'{name}' is {value}; this server generates at most {config.max_tokens} tokens a request",
                       param=name, code="max_tokens_too_large")
    return value


def _sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """LLM.generate's sampling arguments, range-checked so the worker never sees a bad one."""
    penalty_names = [n for n in ("repetition_penalty", "repeat_penalty") if body.get(n) is not None]
    if len(penalty_names) == 2 and body["repetition_penalty"] != body["repeat_penalty"]:
        raise ApiError("'repetition_penalty' and 'repeat_penalty' are the same setting and disagree",
                       param="repetition_penalty", code="invalid_value")
    options: dict[str, Any] = {
        "temperature": _number(body, "temperature", 1.0, lambda v: 0 <= v <= 2, "between 0 and 2"),
        "top_p": _number(body, "top_p", 1.0, lambda v: 0 < v <= 1, "in (0, 1]"),
        "min_p": _number(body, "min_p", 0.0, lambda v: 0 <= v < 1, "in [0, 1)"),
        "repetition_penalty": _number(body, penalty_names[0] if penalty_names else "repetition_penalty", 1.0,
                                      lambda v: v <= 10 and positive_in_f32(v), "in (0, 10] (and not 0 in f32)"),
        "top_k": _integer(body, "top_k", 0, 0),
        "seed": _integer(body, "seed", None, 0),
    }
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    elif not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ApiError(f"'stop' must be a string or a list of strings, got a {json_type(stop)}", param="stop",
                       code="invalid_type")
    if len(stop) > MAX_STOP_STRINGS:
        raise ApiError(f"'stop' has {len(stop)} strings; at most {MAX_STOP_STRINGS}", param="stop",
                       code="invalid_value")
    options["stop"] = tuple(s for s in stop if s)
    return options


def _number(body: Mapping[str, Any], name: str, default: float, ok, range_text: str) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not is_real(value, finite=False):
        raise ApiError(f"'{name}' must be a number, got a {json_type(value)}", param=name, code="invalid_type")
    if not ok(value):
        raise ApiError(f"'{name}' must be {range_text}, got {value!r}", param=name, code="invalid_value")
    return float(value)


def _integer(body: Mapping[str, Any], name: str, default: int | None, least: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if not is_integer(value):
        raise ApiError(f"'{name}' must be an integer, got a {json_type(value)}", param=name, code="invalid_type")
    if value < least:
        raise ApiError(f"'{name}' must be >= {least}, got {value}", param=name, code="invalid_value")
    return value


def _bool(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(f"'{name}' must be a boolean, got a {json_type(value)}", param=name, code="invalid_type")
    return value
