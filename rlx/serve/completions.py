"""POST /v1/completions and /v1/chat/completions over a ``GenerationQueue``.

OpenAI's response shapes: ``text_completion`` / ``chat.completion`` objects,
or with ``"stream": true`` server-sent events (``data: {json}\\n\\n`` chunks,
then ``data: [DONE]\\n\\n``), the chat stream's first chunk carrying the
assistant role as OpenAI's does. A prompt is tokenized here, before it is
queued, so one longer than the model's context is a 400 and never waits.
A client that disconnects cancels its job (``GenerationQueue.cancel``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from rlx.errors import InputError, UnsupportedOpError
from rlx.serve.generation import GenerationJob, GenerationQueue, GenerationResult
from rlx.serve.generation_request import GenerationRequest, parse_generation_request
from rlx.serve.limits import ApiError, BatcherClosedError, QueueFullError, ServeConfig

CLIENT_CLOSED = 499   # nginx's status for "the client went away"; only ever seen in /metrics


class CompletionRoutes:
    """The two endpoints' handlers; ``read_json(request)`` reads a body within the server's limits."""

    def __init__(self, queue: GenerationQueue, config: ServeConfig, read_json) -> None:
        self.queue = queue
        self.llm = queue.llm
        self.config = config
        self._read_json = read_json

    async def completions(self, request: Request) -> Response:
        return await self._handle(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._handle(request, chat=True)

    async def _handle(self, request: Request, chat: bool) -> Response:
        body = await self._read_json(request)
        req = parse_generation_request(body, self.config, chat)
        tokens = self._tokenize(req)
        job = GenerationJob(tokens, {**req.options, "max_tokens": self._budget(req, len(tokens))},
                            asyncio.get_running_loop())
        try:
            self.queue.submit(job)
        except QueueFullError as e:
            raise ApiError(str(e), status=429, kind="rate_limit_error", code="queue_full") from None
        except BatcherClosedError as e:
            raise ApiError(str(e), status=503, kind="server_error", code="shutting_down") from None
        shape = _Shape(chat, self.config.llm_name)
        if req.stream:
            return _EventStream(self._stream(job, shape, req), media_type="text/event-stream",
                                headers={"cache-control": "no-cache"})
        return await self._collect(request, job, shape)

    def _tokenize(self, req: GenerationRequest) -> list[int]:
        if req.chat:
            try:
                prompt = self.llm.chat_prompt(req.messages, self.config.chat_template)
            except (InputError, UnsupportedOpError) as e:
                raise ApiError(str(e), param="messages", code="invalid_value") from None
        else:
            prompt = req.prompt
        tokens = self.llm.tokenizer.encode(prompt, add_bos=True)
        # At least one token of room: a prompt that fills the context could generate nothing.
        if len(tokens) >= self.llm.max_context:
            raise ApiError(f"the prompt has {len(tokens)} tokens; this model's context holds "
                           f"{self.llm.max_context}, prompt and completion together",
                           param="messages" if req.chat else "prompt", code="context_length_exceeded")
        return tokens

    def _budget(self, req: GenerationRequest, prompt_tokens: int) -> int:
        """Tokens to generate: as asked (else the server's cap), ending at the context's end ("length")."""
        asked = req.max_tokens if req.max_tokens is not None else self.config.max_tokens
        return min(asked, self.llm.max_context - prompt_tokens)

    async def _collect(self, request: Request, job: GenerationJob, shape: _Shape) -> Response:
        pieces = []
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            while True:
                event = asyncio.ensure_future(job.events.get())
                done, _ = await asyncio.wait({event, gone}, return_when=asyncio.FIRST_COMPLETED)
                if event not in done:
                    event.cancel()
                    self.queue.cancel(job)
                    return Response(status_code=CLIENT_CLOSED)
                kind, value = event.result()
                if kind == "text":
                    pieces.append(value)
                elif kind == "done":
                    return JSONResponse(shape.whole("".join(pieces), value))
                else:
                    raise _failure(value)
        finally:
            gone.cancel()

    async def _stream(self, job: GenerationJob, shape: _Shape, req: GenerationRequest) -> AsyncIterator[str]:
        """The SSE body. Starlette cancels this generator when the client
        disconnects; the finally then frees the job's slot."""
        finished = False
        try:
            if shape.chat:
                yield _sse(shape.chunk({"role": "assistant", "content": ""}))
            while True:
                kind, value = await job.events.get()
                if kind == "text":
                    yield _sse(shape.chunk({"content": value} if shape.chat else value))
                elif kind == "done":
                    finished = True
                    yield _sse(shape.chunk({} if shape.chat else "", value.finish_reason))
                    if req.include_usage:
                        yield _sse(shape.usage_chunk(value))
                    yield "data: [DONE]\n\n"
                    return
                else:
                    finished = True
                    # The status line is long gone: the error goes in the stream, as OpenAI's does.
                    yield _sse(_failure(value).body())
                    return
        finally:
            if not finished:
                self.queue.cancel(job)


class _EventStream(StreamingResponse):
    """A StreamingResponse that always closes its body generator: when the
    client leaves while the generator waits at a ``yield``, Starlette stops
    sending without closing it, and its ``finally`` (which frees the job's
    slot) would wait for the garbage collector."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()


class _Shape:
    """The OpenAI objects of one response: a whole completion, stream chunks, usage."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def whole(self, text: str, result: GenerationResult) -> dict[str, Any]:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": result.finish_reason}
            return {**self._head("chat.completion"), "choices": [choice], "usage": _usage(result)}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": result.finish_reason}
        return {**self._head("text_completion"), "choices": [choice], "usage": _usage(result)}

    def chunk(self, delta: Any, finish_reason: str | None = None) -> dict[str, Any]:
        """A stream chunk: ``delta`` is chat's delta object, or the completion's text."""
        if self.chat:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**self._head("chat.completion.chunk"), "choices": [choice]}
        choice = {"index": 0, "text": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._head("text_completion"), "choices": [choice]}

    def usage_chunk(self, result: GenerationResult) -> dict[str, Any]:
        return {**self._head("chat.completion.chunk" if self.chat else "text_completion"), "choices": [],
                "usage": _usage(result)}


def _usage(result: GenerationResult) -> dict[str, int]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _failure(error: BaseException) -> ApiError:
    if isinstance(error, BatcherClosedError):
        return ApiError(str(error), status=503, kind="server_error", code="shutting_down")
    if isinstance(error, InputError):
        return ApiError(str(error), code="invalid_value")
    return ApiError(f"internal error: {type(error).__name__}: {error}", status=500, kind="server_error",
                    code="internal_error")


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (after the body, the next ASGI message is that)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return
