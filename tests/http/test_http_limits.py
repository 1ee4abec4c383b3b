"""HTTP connection limits (http/limits.py): a real server in a subprocess with a low descriptor
limit, flooded from 127.0.0.1 by connections that never finish their headers, while a client holding
the token searches."""

from __future__ import annotations

import logging
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from helpers import write, text_of
from mcp_kb.http.limits import RepeatedLineFilter

TOKEN = "flood-test-token"
FD_LIMIT = 256  # the server's descriptor limit (soft and hard): it may keep 128 connections


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """`mcp-kb serve --transport http` on a synced KB, with a 2 s header deadline and FD_LIMIT descriptors."""
    write(tmp_path / "docs" / "runbook.md", "# Runbook\n\nRestart the ingest worker when its queue backs up.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[server]\nheader_timeout = 2\n[[kb]]\nname = "docs"\n'
        f'description = "Runbooks"\npaths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    env = {**os.environ, "MCP_KB_TOKEN": TOKEN}
    subprocess.run([sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)], env=env, check=True, timeout=300)
    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config), "--transport", "http", "--port", "0"],
            env=env,
            stderr=stderr,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT)),
        )
    deadline = time.monotonic() + 120
    while not (match := re.search(r"serving .* at http://[^:]+:(\d+)/", log.read_text())):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    try:
        yield int(match[1]), log
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def flood(port: int, connections: int) -> Iterator[list[int]]:
    """Keeps `connections` connections open that send half a request head and nothing more, reopening
    each one the server closes, until the block ends (at most 20,000 reopenings)."""
    stop = threading.Event()
    opened = [0]

    def attacker() -> None:
        sockets: list[socket.socket | None] = [None] * connections
        try:
            while not stop.is_set() and opened[0] < 20_000:
                for index, sock in enumerate(sockets):
                    if sock is not None and _closed_by_peer(sock):
                        sock.close()
                        sock = sockets[index] = None
                    if sock is None:
                        try:
                            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                            sock.setblocking(False)
                            sockets[index] = sock
                            opened[0] += 1
                        except OSError:
                            pass
                stop.wait(0.05)
        finally:
            for sock in sockets:
                if sock is not None:
                    sock.close()

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        stop.set()
        thread.join(timeout=60)


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.mark.anyio
async def test_a_flood_of_connections_that_never_finish_their_headers_does_not_lock_out_a_client(
    server: tuple[int, Path],
) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    port, log = server
    with flood(port, connections=400) as opened:
        while opened[0] < 400:  # the whole flood is in before the client comes
            await anyio.sleep(0.05)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        with anyio.fail_after(120):
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                results = [await client.call_tool("search_docs", {"query": q}) for q in ("restart", "queue", "ingest")]
    assert [r.is_error for r in results] == [False, False, False], [text_of(r.content[0]) for r in results]
    assert all(r.structured_content["results"] for r in results)
    stderr = log.read_text()
    assert len(stderr) < 20_000 and stderr.count("Too many open files") <= 1, stderr[-2000:]


def test_a_connection_dripping_its_headers_is_closed_at_the_header_deadline(server: tuple[int, Path]) -> None:
    port, _log = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(0.2)
        started = time.monotonic()
        for byte in b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 1000:  # 200 s at this pace
            try:
                sock.sendall(bytes([byte]))
                if sock.recv(1) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:  # reset by the server: closed as well
                break
        else:
            pytest.fail("the server kept a dripping connection open for the whole drip")
    assert time.monotonic() - started < 60  # the deadline is 2 s; far below what the drip would take


def test_a_repeated_log_line_is_shown_once_per_window_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("mcp_kb.test.flood")
    shown: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: shown.append(record.getMessage())  # type: ignore[method-assign]  # a handler keeping what it is given
    handler.addFilter(RepeatedLineFilter(window=3600))
    logger.addHandler(handler)
    try:
        for _ in range(1000):
            logger.warning("accept failed: %s", "Too many open files")
        logger.warning("another problem")
    finally:
        logger.removeHandler(handler)
    assert shown == ["accept failed: Too many open files", "another problem"]
