"""``rlx serve``: an OpenAI-compatible embeddings and text generation server (an ASGI app).

The pieces are small on purpose: ``limits`` (configuration, embedding
request validation and the errors it raises), ``batcher`` (one worker
thread that groups concurrent requests' texts into ``encode`` calls),
``generation_request`` (completion and chat request validation),
``generation`` (the bounded queue and the one thread that owns the LLM),
``completions`` (the generation routes and their OpenAI shapes, streaming
included), ``metrics`` (Prometheus text format) and ``app`` (the Starlette
routes). The server
stack (starlette, uvicorn) is the optional extra ``rlx[serve]``; importing
this package does not need it, ``create_app`` does.
"""

from __future__ import annotations

from rlx.serve.batcher import Batcher
from rlx.serve.limits import ApiError, BatcherClosedError, QueueFullError, ServeConfig

__all__ = ["ApiError", "Batcher", "BatcherClosedError", "QueueFullError", "ServeConfig", "create_app"]


def create_app(embedder=None, config: ServeConfig | None = None, llm=None):
    """The ASGI app serving ``embedder`` and/or ``llm`` (see ``rlx.serve.app.create_app``)."""
    from rlx.serve.app import create_app as _create_app

    return _create_app(embedder, config, llm)
