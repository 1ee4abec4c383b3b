"""An OpenAI-compatible embeddings service on 127.0.0.1: a small ASGI app (Starlette under uvicorn)
answering POST /v1/embeddings with vectors from the offline model, with switches to inject faults:
statuses, slowness, malformed or lying answers (`lie` rewrites the true answer, `raw` replaces it),
a body dripped a byte at a time, a redirect, requests held at a gate (a sync caught mid-way).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from asgi_server import json_answer, serve_asgi
from starlette.applications import Starlette

if TYPE_CHECKING:
    from mcp_kb.models.base import Embedder
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


@dataclass
class Faults:
    """What the next requests get instead of vectors; counts go down as they are used."""

    status: int = 0  # answer this status...
    status_count: int = 0  # ...to this many requests
    retry_after: str | None = None
    delay: float = 0.0  # seconds before answering queries of one text (searches)
    dimension: int | None = None  # cut vectors to this many numbers
    malformed: bool = False
    api_key: str | None = None  # when set, other keys get 401
    lie: Callable[[dict[str, Any]], object] | None = (
        None  # the answer sent (JSON, or bytes as they are), made from the true one
    )
    raw: bytes | None = None  # the body sent instead of any answer
    drip: float = 0.0  # seconds between the bytes of the body
    redirect: str | None = None  # answer 307 to this address
    hold: Callable[[list[str]], bool] | None = None  # requests whose texts it picks wait until `gate` is set
    gate: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)  # set when a request first waits at the gate


@dataclass
class EmbeddingService:
    embedder: Embedder  # the offline model (tests' session embedder)
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    faults: Faults = field(default_factory=Faults)
    requests: list[tuple[float, int, int]] = field(default_factory=list)  # (time, texts, status)
    bytes_dripped: int = 0
    url: str = ""

    async def embeddings(self, request: Request) -> Response:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        status = self._fault_status(request)
        self.requests.append((time.monotonic(), len(texts), status))
        if status == 401:
            return JSONResponse({"error": {"message": "Incorrect API key provided"}}, status_code=401)
        if status:
            headers = {"Retry-After": self.faults.retry_after} if self.faults.retry_after else {}
            return JSONResponse({"error": {"message": "injected"}}, status_code=status, headers=headers)
        if body.get("model") != self.model:
            return JSONResponse({"error": {"message": f"model {body.get('model')} not found"}}, status_code=404)
        if self.faults.hold and self.faults.hold(texts) and not self.faults.gate.is_set():
            self.faults.held.set()
            await anyio.to_thread.run_sync(self.faults.gate.wait)
        if self.faults.delay and len(texts) == 1:
            await anyio.sleep(self.faults.delay)
        if self.faults.malformed:
            return Response("<html>502 Bad Gateway</html>", media_type="text/html")
        if self.faults.redirect:
            return RedirectResponse(self.faults.redirect, status_code=307)
        vectors = await anyio.to_thread.run_sync(self.embedder.embed_batch, texts)
        if self.faults.dimension:
            vectors = vectors[:, : self.faults.dimension]
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        data.reverse()  # services may answer out of order; `index` says which is which
        answer = {"object": "list", "data": data, "model": self.model, "usage": {"prompt_tokens": 0, "total_tokens": 0}}
        told = self.faults.lie(answer) if self.faults.lie else answer
        body = (
            self.faults.raw
            if self.faults.raw is not None
            else told
            if isinstance(told, bytes)
            else json.dumps(told).encode()
        )
        return json_answer(body, self.faults.drip, self._dripped_byte)

    def _dripped_byte(self) -> None:
        self.bytes_dripped += 1

    def _fault_status(self, request: Request) -> int:
        if self.faults.api_key and request.headers.get("authorization") != f"Bearer {self.faults.api_key}":
            return 401
        if self.faults.status_count > 0:
            self.faults.status_count -= 1
            return self.faults.status
        return 0

    def embedded_texts(self) -> int:
        return sum(texts for _, texts, status in self.requests if not status)


@contextmanager
def serve_embeddings(service: EmbeddingService) -> Iterator[EmbeddingService]:
    app = Starlette(routes=[Route("/v1/embeddings", service.embeddings, methods=["POST"])])
    with serve_asgi(app) as url:
        service.url = f"{url}/v1"
        yield service
