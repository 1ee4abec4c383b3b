"""A load balancer on 127.0.0.1 for the replica tests: each HTTP request goes to the next backend in
turn (no sticky sessions), its answer streamed back. It counts what each backend served."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from starlette.types import Receive, Scope, Send
from asgi_server import serve_asgi

_HOP_BY_HOP = {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"content-length"}


@contextmanager
def round_robin(backends: list[str]) -> Iterator[tuple[str, Counter[str]]]:
    """Yields the balancer's base URL and a Counter of requests per backend."""
    served: Counter[str] = Counter()
    turn = itertools.cycle(backends)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        backend = next(turn)
        served[backend] += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        url = backend + scope["path"] + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        async with httpx.AsyncClient(timeout=60) as http:
            async with http.stream(scope["method"], url, headers=headers, content=body) as answer:
                await send(
                    {
                        "type": "http.response.start",
                        "status": answer.status_code,
                        "headers": [(k, v) for k, v in answer.headers.raw if k.lower() not in _HOP_BY_HOP],
                    }
                )
                async for piece in answer.aiter_raw():
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                await send({"type": "http.response.body", "body": b""})

    with serve_asgi(app) as url:
        yield url, served
