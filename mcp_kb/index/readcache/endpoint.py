"""The cache's HTTP side on the loopback address: HTTP/1.1 (h11) with keep-alive and bounded heads, hits
answered on its loop, answers that wait on the store on worker threads."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import h11

from ...vocabulary import LOOPBACK

log = logging.getLogger(__name__)

_MAX_HEAD_BYTES = 16 * 1024  # a request line and headers longer than this end the connection
_IDLE_SECONDS = 120.0  # an idle or dripping connection is closed after this long

Reply = tuple[int, dict[str, str], bytes]  # status, headers, body
Answer = Callable[[str, str, dict[str, str]], Reply]  # (method, target, headers) -> the reply


def s3_error(status: int, code: str, message: str) -> Reply:
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'
    return status, {"content-type": "application/xml", "content-length": str(len(body))}, body.encode()


class WouldWait(Exception):
    """An answer needs the store: it is worked out on a worker thread instead of the loop."""


class Endpoint:
    """The cache's HTTP side: an asyncio loop on its own thread speaks HTTP/1.1 (h11) with keep-alive;
    hits are answered on the loop, answers that wait on the store on worker threads, so a slow store
    holds up no hit. (LanceDB makes ~60 requests a hybrid search: their overhead is the cache's cost.)"""

    def __init__(self, answer_now: Answer, answer: Answer):
        self._answer_now, self._answer = answer_now, answer
        self._workers = ThreadPoolExecutor(32, thread_name_prefix="mcp-kb read cache")
        started = threading.Event()
        self._failure: OSError | None = None
        threading.Thread(target=self._run, args=(started,), name="mcp-kb read cache", daemon=True).start()
        started.wait()
        if self._failure is not None:
            raise self._failure

    def _run(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(asyncio.start_server(self._serve, LOOPBACK, 0))
            self.address: tuple[str, int] = server.sockets[0].getsockname()[:2]
        except OSError as exc:  # no loopback port for us (a sandbox): the caller goes without the cache
            self._failure = exc
            return
        finally:
            started.set()
        loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        try:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await asyncio.wait_for(reader.read(65536), _IDLE_SECONDS))
                elif isinstance(event, h11.Request):
                    if event.method in (b"GET", b"HEAD") and not await self._end_of(connection, reader):
                        return
                    if not await self._respond(connection, event, writer):
                        return
                    connection.start_next_cycle()
                else:  # the client closed, or sent what needs no answer
                    return
        except (TimeoutError, h11.ProtocolError, OSError):
            return
        finally:
            writer.close()

    @staticmethod
    async def _end_of(connection: h11.Connection, reader: asyncio.StreamReader) -> bool:
        """Read to the end of a request (a GET has no body; one that sends one is cut off)."""
        while (event := connection.next_event()) is not h11.PAUSED:
            if isinstance(event, h11.EndOfMessage):
                return True
            if event is h11.NEED_DATA:
                connection.receive_data(await asyncio.wait_for(reader.read(65536), _IDLE_SECONDS))
            elif not isinstance(event, h11.Data) or len(event.data) > _MAX_HEAD_BYTES:
                return False
        return False

    async def _respond(self, connection: h11.Connection, request: h11.Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close (a body we do not read, an error)."""
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        reads = method in ("GET", "HEAD")
        try:
            try:  # a hit is answered here: handing it to a thread and back cost as much as the hit
                status, answer_headers, body = self._answer_now(method, target, headers)
            except WouldWait:
                status, answer_headers, body = await asyncio.get_running_loop().run_in_executor(
                    self._workers, self._answer, method, target, headers
                )
        except Exception:  # a bug here must cost one request, never the reader
            log.exception("read cache: a request failed")
            status, answer_headers, body = s3_error(500, "InternalError", "the read cache failed")
        if not reads:
            answer_headers = {**answer_headers, "connection": "close"}  # its body was not read
        writer.write(connection.send(h11.Response(status_code=status, headers=list(answer_headers.items()))))
        if body and method != "HEAD":
            writer.write(connection.send(h11.Data(data=body)))
        writer.write(connection.send(h11.EndOfMessage()))
        await writer.drain()
        return reads and connection.our_state is h11.DONE and connection.their_state is h11.DONE
