"""The HTTP edge: Starlette routes over a ``Batcher`` (embeddings) and a
``GenerationQueue`` (text generation), either or both.

POST /v1/embeddings, POST /v1/completions and /v1/chat/completions
(``rlx.serve.completions``), with OpenAI's request and response shapes; GET
/v1/models, GET /health, GET /metrics. Every refusal is OpenAI-style JSON
with a 4xx status; anything unexpected is a JSON 500, and the server keeps
serving.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from rlx.errors import ConfigError
from rlx.serve.batcher import Batcher
from rlx.serve.generation import GenerationJob, GenerationQueue, GenerationResult
from rlx.serve.limits import (
    ApiError,
    BatcherClosedError,
    QueueFullError,
    ServeConfig,
    parse_embedding_request,
)
from rlx.serve.metrics import Metrics
from rlx.text_input import unicode_problem

CLIENT_CLOSED = 499   # nginx's status for "the client went away"; only ever seen in /metrics


def embed_function(embedder, max_batch: int) -> Callable[[list[str]], tuple[np.ndarray, np.ndarray]]:
    """What the batcher calls: ``encode`` of the texts (one executable run
    when they fit ``max_batch``) and each text's token count after
    truncation, for ``usage``."""

    encode_ids = getattr(embedder, "encode_ids", None)

    def embed(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = embedder.tokenize(texts)
        counts = np.array([len(i) for i in ids], np.int64)
        if encode_ids is not None:   # tokenize once (on an accelerator it costs as much as the run)
            return encode_ids(ids, batch_size=max_batch), counts
        return embedder.encode(texts, batch_size=max_batch), counts

    return embed


def create_app(embedder=None, config: ServeConfig | None = None, llm=None) -> Starlette:
    """The ASGI app serving ``embedder`` (an ``rlx.models.Embedder``, or
    anything with ``dim``, ``tokenize`` and ``encode``) and/or ``llm`` (an
    ``rlx.models.llm.LLM``); at least one. The batcher and generation
    threads start and stop with the app's lifespan."""
    if embedder is None and llm is None:
        raise ConfigError("create_app needs an embedder, an LLM or both")
    config = config or ServeConfig()
    batcher = generator = None
    metrics = Metrics(config.max_batch, queue_depth=lambda: batcher.queue_depth if batcher else 0,
                      generation_queue_depth=lambda: generator.queue_depth if generator else 0)
    if embedder is not None:
        batcher = Batcher(embed_function(embedder, config.max_batch), max_batch=config.max_batch,
                          max_wait_ms=config.max_wait_ms, max_queue=config.max_queue,
                          on_batch=metrics.observe_batch, max_batch_tokens=config.max_batch_tokens,
                          cost=lambda texts: [len(ids) for ids in embedder.tokenize(texts)])
    if llm is not None:
        generator = GenerationQueue(llm, max_queue=config.max_gen_queue, on_finish=_metrics_hook(metrics))
    created = int(time.time())
    dim = int(embedder.dim) if embedder is not None else None
    workers = [w for w in (batcher, generator) if w is not None]

    def counted(route: str, handler: Callable[[Request], Awaitable[Response]]):
        async def endpoint(request: Request) -> Response:
            t0 = time.perf_counter()
            try:
                response = await handler(request)
            except ApiError as e:
                response = JSONResponse(e.body(), status_code=e.status)
            except ClientDisconnect:   # gone in the middle of its body: nothing was queued
                response = Response(status_code=CLIENT_CLOSED)
            except Exception as e:   # noqa: BLE001 - one request's failure must not take the server down
                response = _error(500, f"internal error: {type(e).__name__}: {e}", "server_error", "internal_error")
            metrics.observe_request(route, response.status_code, time.perf_counter() - t0)
            return response

        return endpoint

    async def embeddings(request: Request) -> Response:
        body = await _read_json(request, config.max_body_bytes)
        req = parse_embedding_request(body, config, dim)
        try:
            future = batcher.submit(req.texts)
        except QueueFullError as e:
            raise ApiError(str(e), status=429, kind="rate_limit_error", code="queue_full") from None
        except BatcherClosedError as e:
            raise ApiError(str(e), status=503, kind="server_error", code="shutting_down") from None
        try:
            result = await _wait_or_disconnect(request, future)
        except BatcherClosedError as e:
            raise ApiError(str(e), status=503, kind="server_error", code="shutting_down") from None
        if result is None:   # the client is gone; nobody reads this
            return Response(status_code=CLIENT_CLOSED)
        rows, tokens = result
        data = []
        for i, row in enumerate(rows):
            if req.encoding_format == "base64":
                # Little-endian float32 bytes: what the openai client decodes (np.frombuffer(..., "float32")).
                value: object = base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
            else:
                value = row.tolist()
            data.append({"object": "embedding", "index": i, "embedding": value})
        n_tokens = int(tokens.sum())
        return JSONResponse({"object": "list", "data": data, "model": req.model,
                             "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}})

    async def models(request: Request) -> Response:
        names = ([config.model_name] if embedder is not None else []) + ([config.llm_name] if llm is not None else [])
        return JSONResponse({"object": "list", "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "rlx"} for name in names]})

    async def health(request: Request) -> Response:
        alive = all(w.alive for w in workers)
        body: dict = {"status": "ok" if alive else "unavailable"}
        if batcher is not None:
            body.update(model=config.model_name, dim=dim, queue_depth=batcher.queue_depth)
        if generator is not None:
            body.update(llm=config.llm_name, generation_queue_depth=generator.queue_depth,
                        generating=generator.busy)
        return JSONResponse(body, status_code=200 if alive else 503)

    async def prometheus(request: Request) -> Response:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        kind = "not_found_error" if status == 404 else "invalid_request_error"
        response = _error(status, f"{request.method} {request.url.path}: {getattr(exc, 'detail', exc)}", kind,
                          "not_found" if status == 404 else "method_not_allowed" if status == 405 else None)
        metrics.observe_request("other", status, 0.0)
        return response

    @asynccontextmanager
    async def lifespan(app: Starlette):
        for worker in workers:
            worker.start()
        try:
            yield
        finally:
            # A worker may be inside encode or generate; closing fails queued requests and lets it exit.
            for worker in workers:
                await asyncio.to_thread(worker.close)

    routes = [Route("/v1/models", counted("/v1/models", models), methods=["GET"]),
              Route("/health", counted("/health", health), methods=["GET"]),
              Route("/metrics", counted("/metrics", prometheus), methods=["GET"])]
    if batcher is not None:
        routes.append(Route("/v1/embeddings", counted("/v1/embeddings", embeddings), methods=["POST"]))
    if generator is not None:
        from rlx.serve.completions import CompletionRoutes

        gen = CompletionRoutes(generator, config, lambda request: _read_json(request, config.max_body_bytes))
        routes += [Route("/v1/completions", counted("/v1/completions", gen.completions), methods=["POST"]),
                   Route("/v1/chat/completions", counted("/v1/chat/completions", gen.chat_completions),
                         methods=["POST"])]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    app.state.batcher = batcher
    app.state.generator = generator
    app.state.metrics = metrics
    app.state.config = config
    return app


def _metrics_hook(metrics: Metrics):
    """GenerationQueue's on_finish, feeding the generation metrics."""

    def on_finish(job: GenerationJob, outcome: str, result: GenerationResult | None, seconds: float,
                  first_text: float | None) -> None:
        waited = job.started - job.arrived if job.started is not None else None
        prompt, generated = (result.prompt_tokens, result.completion_tokens) if result else (0, 0)
        metrics.observe_generation(outcome, prompt, generated, waited, seconds, first_text)

    return on_finish


def _error(status: int, message: str, kind: str, code: str | None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}},
                        status_code=status)


async def _read_json(request: Request, limit: int) -> object:
    """The body as JSON, refusing more than ``limit`` bytes without reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(f"the body has {declared} bytes; at most {limit}", status=413, code="body_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(f"the body has more than {limit} bytes", status=413, code="body_too_large")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except RecursionError:   # Python's parser recurses per nesting level
        raise ApiError("the body's JSON is nested too deeply", code="invalid_json") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(f"the body is not valid JSON ({e})", code="invalid_json") from None
    problem = _text_problem(body)
    if problem:
        raise ApiError(f"the body holds a string that is not valid Unicode text: {problem}", code="invalid_unicode")
    return body


def _text_problem(body: object) -> str | None:
    """The first string in a decoded body (keys included) that UTF-8 cannot
    encode (JSON's "\\ud800" escapes decode to lone surrogates, which no
    tokenizer takes), described, or None. Iterative: the body is at most
    the byte limit, but nested arbitrarily."""
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = unicode_problem(item)
            if problem:
                return problem
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


async def _wait_or_disconnect(request: Request, future) -> tuple[np.ndarray, np.ndarray] | None:
    """The batcher's result, or None when the client disconnects first. A
    request still queued is then cancelled (the worker skips it); one
    already in a batch finishes and its rows are dropped."""
    result = asyncio.wrap_future(future)
    # After the body is read, the next ASGI message is http.disconnect: wait for it alongside.
    gone = asyncio.ensure_future(request.receive())
    try:
        done, _ = await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
        if result in done:
            return result.result()
        message = gone.result()
        if message.get("type") != "http.disconnect":   # not expected after the body; keep waiting
            return await result
        future.cancel()
        return None
    finally:
        gone.cancel()
        if not result.done():
            result.cancel()
