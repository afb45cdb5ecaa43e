"""Server configuration, request validation, and the errors both raise.

Every error here is an ``RlxError``; the HTTP edge (``rlx.serve.app``) turns
``ApiError`` into OpenAI-style JSON (``{"error": {"message", "type",
"code"}}``) with its status, so a bad request never reaches the worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.arg_types import is_integer, is_real
from rlx.errors import CapacityError, ConfigError, InputError, RlxError

ENCODING_FORMATS = ("float", "base64")


class ApiError(InputError):
    """A request the server refuses; ``status`` is the HTTP status, ``kind``
    and ``code`` the OpenAI error ``type`` and ``code``."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.code = code
        self.param = param

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


class QueueFullError(CapacityError):
    """The batcher's queue holds ``max_queue`` texts already (HTTP 429)."""


class BatcherClosedError(RlxError):
    """The batcher was closed before (or while) a request was waiting (HTTP 503)."""


@dataclass(frozen=True)
class ServeConfig:
    """Limits of one server. Texts longer than the model's maximum token
    count are truncated (as ``Embedder.encode`` does), so the result equals
    ``encode`` of the same text; ``max_chars`` bounds what the tokenizer is
    given at all."""

    model_name: str = "all-MiniLM-L6-v2"
    max_batch: int = 64           # texts per encode call
    max_wait_ms: float = 5.0      # how long the oldest queued text may wait for others, under concurrent traffic
    max_queue: int = 1024         # queued texts (all requests) before 429
    max_inputs: int = 2048        # texts per request (OpenAI's limit)
    max_chars: int = 32768        # characters per text
    max_body_bytes: int = 16 << 20
    max_batch_tokens: int | None = 8192   # rows x longest text's tokens per encode call; None: no budget
    # Text generation (rlx.serve.generation), when an LLM is served.
    llm_name: str = "llm"          # the id clients use for the LLM
    max_tokens: int = 2048         # tokens one request may ask for (more: 400); also the default
    max_gen_queue: int = 64        # generations waiting for the LLM (not counting the running one) before 429
    max_prompt_chars: int = 262144   # characters of a prompt (all messages) before it is tokenized (more: 413)
    chat_template: str | None = None   # a name from rlx.models.chat_template.TEMPLATES; None: the model's own

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_queue", "max_inputs", "max_chars", "max_body_bytes", "max_tokens",
                     "max_gen_queue", "max_prompt_chars"):
            value = getattr(self, name)
            if not is_integer(value) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if self.max_batch_tokens is not None and (not is_integer(self.max_batch_tokens) or
                                                  self.max_batch_tokens < 1):
            raise ConfigError(f"max_batch_tokens must be an integer >= 1 or None, got {self.max_batch_tokens!r}")
        if not is_real(self.max_wait_ms) or self.max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms must be a finite number >= 0, got {self.max_wait_ms!r}")
        if not self.model_name or not self.llm_name:
            raise ConfigError("model_name and llm_name must not be empty")
        if self.chat_template is not None:
            from rlx.models.chat_template import TEMPLATES

            if self.chat_template not in TEMPLATES:
                raise ConfigError(f"chat_template must be one of {', '.join(TEMPLATES)} (or None), got "
                                  f"{self.chat_template!r}")


@dataclass(frozen=True)
class EmbeddingRequest:
    texts: list[str]
    encoding_format: str
    model: str


def parse_embedding_request(body: object, config: ServeConfig, dim: int) -> EmbeddingRequest:
    """Validate a decoded JSON body of POST /v1/embeddings (OpenAI's shape)."""
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(body).__name__}")
    if "input" not in body:
        raise ApiError("'input' is required", param="input", code="missing_input")
    raw = body["input"]
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, list):
        if not raw:
            raise ApiError("'input' must not be an empty list", param="input", code="empty_input")
        for i, t in enumerate(raw):
            if not isinstance(t, str):
                # OpenAI also takes token-id arrays; this server embeds text only.
                raise ApiError(f"'input[{i}]' is a {json_type(t)}; only strings are supported",
                               param="input", code="invalid_type")
        texts = raw
    else:
        raise ApiError(f"'input' must be a string or a list of strings, got a {json_type(raw)}",
                       param="input", code="invalid_type")
    # A request larger than the whole queue could never be admitted: that is 413, not a retryable 429.
    most = min(config.max_inputs, config.max_queue)
    if len(texts) > most:
        raise ApiError(f"{len(texts)} inputs in one request; at most {most}", status=413,
                       param="input", code="too_many_inputs")
    for i, t in enumerate(texts):
        if not t:
            raise ApiError(f"'input[{i}]' is empty", param="input", code="empty_input")
        if len(t) > config.max_chars:
            raise ApiError(f"'input[{i}]' has {len(t)} characters; at most {config.max_chars}", status=413,
                           param="input", code="input_too_long")
    fmt = body.get("encoding_format")
    if fmt is None:
        fmt = "float"
    if fmt not in ENCODING_FORMATS:
        raise ApiError(f"'encoding_format' must be one of {', '.join(ENCODING_FORMATS)}, got {fmt!r}",
                       param="encoding_format", code="invalid_value")
    model = body.get("model", config.model_name)   # optional here; OpenAI's client always sends it
    if not isinstance(model, str):
        raise ApiError(f"'model' must be a string, got a {json_type(model)}", param="model", code="invalid_type")
    if model not in served_names(config):
        raise ApiError(f"model {model!r} is not served here (this server serves {config.model_name!r})",
                       status=404, param="model", code="model_not_found")
    dims = body.get("dimensions")
    if dims is not None and (isinstance(dims, bool) or dims != dim):
        # Matryoshka truncation would change the vectors' meaning for this model: refuse instead.
        raise ApiError(f"'dimensions' must be {dim} for this model, got {dims!r}", param="dimensions",
                       code="invalid_value")
    return EmbeddingRequest(texts=texts, encoding_format=fmt, model=config.model_name)


def served_names(config: ServeConfig) -> set[str]:
    """The names a request may use for the served embedding model: its id,
    and the last path part of it (so "sentence-transformers/all-MiniLM-L6-v2"
    also works)."""
    return names_for(config.model_name) | {f"sentence-transformers/{config.model_name}"}


def names_for(name: str) -> set[str]:
    """A served model's id and the last path part of it."""
    return {name, name.rstrip("/").rsplit("/", 1)[-1]}


def json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)
