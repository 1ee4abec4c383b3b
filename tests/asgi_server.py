"""An ASGI app served by uvicorn on 127.0.0.1 in a thread, for the fake services the tests start, and the
JSON answer those services send (whole, or dripped a byte at a time)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import anyio
import uvicorn
from starlette.responses import Response, StreamingResponse


def json_answer(body: bytes, drip: float = 0.0, on_byte: Callable[[], None] = lambda: None) -> Response:
    """`body` as an application/json answer; with `drip`, one byte every `drip` seconds (`on_byte` counts them)."""
    if not drip:
        return Response(body, media_type="application/json")

    async def dripped() -> AsyncIterator[bytes]:
        for offset in range(len(body)):
            yield body[offset : offset + 1]
            on_byte()
            await anyio.sleep(drip)

    return StreamingResponse(dripped(), media_type="application/json")


@contextmanager
def serve_asgi(app: Callable[..., Awaitable[None]], lifespan: Literal["auto", "on", "off"] = "off") -> Iterator[str]:
    """Yields the server's base URL (http://127.0.0.1:PORT) once it accepts connections (and, with
    lifespan="on", once the app's lifespan has started)."""
    sock = socket.socket()
    # uvicorn writes headers and body separately: without this, Nagle and delayed ACKs add 40 ms a request
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
