"""A reranking service on 127.0.0.1 speaking both API families: Jina/Cohere-style POST /v1/rerank and
Hugging Face TEI's POST /rerank. It scores by the offline embedding model's cosine between query and
passage (deterministic, and a different order than the fused one), and has switches for faults: statuses
(with a Retry-After), slowness, planted answers (JSON or raw bytes), a body dripped a byte at a time,
a redirect."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import numpy as np
from asgi_server import json_answer, serve_asgi
from starlette.applications import Starlette

if TYPE_CHECKING:
    from mcp_kb.models.base import Embedder
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


@dataclass
class RerankService:
    embedder: Embedder
    model: str = "test-reranker"
    api_key: str | None = None  # when set, other keys get 401
    delay: float = 0.0  # seconds before answering
    status: int = 0  # answer this status instead...
    status_count: int = 0  # ...to this many requests
    answer: object = None  # send this JSON instead of the scores (a malformed or lying answer)...
    raw: bytes | None = None  # ...or these bytes
    drip: float = 0.0  # seconds between the bytes of the body
    retry_after: str | None = None  # sent with `status`
    redirect: str | None = None  # answer 307 to this address
    bytes_dripped: int = 0
    batches: list[int] = field(default_factory=list)  # passages per scored request
    calls: int = 0  # requests received, refused ones included
    url: str = ""

    async def cohere(self, request: Request) -> Response:
        body = await request.json()
        refused = await self._refused(request)
        if refused:
            return refused
        if body.get("model") != self.model:
            return JSONResponse({"detail": f"model {body.get('model')} not found"}, status_code=404)
        scores = await self._scores(body["query"], body["documents"])
        results = sorted(
            ({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
            key=lambda item: -item["relevance_score"],
        )[: body.get("top_n") or len(scores)]
        return self._answer({"model": self.model, "results": results})

    async def tei(self, request: Request) -> Response:
        body = await request.json()
        refused = await self._refused(request)
        if refused:
            return refused
        scores = await self._scores(body["query"], body["texts"])
        ranked = sorted(({"index": i, "score": s} for i, s in enumerate(scores)), key=lambda item: -item["score"])
        return self._answer(ranked)

    def _answer(self, scores: object) -> Response:
        """The scores, or the answer a test planted (NaN allowed: a lying service may send it)."""
        body = self.raw if self.raw is not None else json.dumps(scores if self.answer is None else self.answer).encode()
        return json_answer(body, self.drip, self._dripped_byte)

    def _dripped_byte(self) -> None:
        self.bytes_dripped += 1

    async def _refused(self, request: Request) -> Response | None:
        self.calls += 1
        if self.delay:
            await anyio.sleep(self.delay)
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": "invalid api key"}, status_code=401)
        if self.status_count > 0:
            self.status_count -= 1
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return JSONResponse({"error": "injected"}, status_code=self.status, headers=headers)
        if self.redirect:
            return RedirectResponse(self.redirect, status_code=307)
        return None

    async def _scores(self, query: str, passages: list[str]) -> list[float]:
        self.batches.append(len(passages))
        vectors = await anyio.to_thread.run_sync(self.embedder.embed_batch, [query, *passages])
        return [float(score) for score in np.asarray(vectors[1:]) @ np.asarray(vectors[0])]


@contextmanager
def serve_rerank(service: RerankService) -> Iterator[RerankService]:
    app = Starlette(
        routes=[Route("/v1/rerank", service.cohere, methods=["POST"]), Route("/rerank", service.tei, methods=["POST"])]
    )
    with serve_asgi(app) as url:
        service.url = url
        yield service
