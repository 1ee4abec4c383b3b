"""Serving: the transports (stdio, SSE, streamable HTTP), the one HTTP app that puts the admin page beside the MCP
endpoint, and how a signal stops a server or a sync. The MCP surface itself is mcp/server.py's, the page's
ui/routes.py's, the HTTP edge's http/."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio

from .api import LOOPBACK, SYNC_WORK_KEPT, App, Gatekeeper, SyncRunner
from .mcp.sdk_import import import_sdk_for_stdio
from .settings import ENV_CURSOR_SECRET, ServerConfig
from .signals import sigterm_interrupts

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # the MCP SDK and the HTTP stack load where a transport needs them (a stdio server: no HTTP)
    from mcp.server.mcpserver import MCPServer
    from starlette.types import Receive, Scope, Send

# A stdio client sends its handshake and tools/list as it launches the server: the server's start-up work (the model
# load, a start-up sync) waits this long at most for them to be answered before it begins. Over HTTP it begins at once.
_HANDSHAKE_WAIT_SECONDS = 1.0
_STOP_GRACE_SECONDS = 0.5  # how long Ctrl-C or SIGTERM leaves a stdio server to shut down before it exits
_SYNC_STOP_SECONDS = 3.0  # how long a stdio server whose client closed stdin waits for its sync to stop
_WORKER_STOP_SECONDS = 5.0  # how long a stopping lead waits for its workers before it kills them
# Set for a worker process by its lead: the listening socket it inherits, and a pipe whose other end the lead holds.
_WORKER_OF = "MCP_KB_WORKER_OF"


def run_server(app: App) -> None:
    """Serve until interrupted as [server] says: stdio, or SSE / streamable HTTP behind bearer tokens (one
    for everything, scoped ones, OAuth access tokens) when the config names any. Over HTTP the admin page
    is served at `/` behind the same tokens, and the repositories' push webhooks below `/hooks/` (signed by each
    repository's own secret: no token).

    For HTTP the socket is bound first, so a busy port is one clear error and `--port 0` picks a
    free one; the URL is printed to stderr.
    """
    settings = app.config.server
    transport, host, port = settings.transport, settings.host, settings.port
    if transport == "stdio":  # first: what this process imports of the SDK is all it will serve with
        if reason := import_sdk_for_stdio():
            log.debug("the MCP SDK was imported whole: %s", reason)
    from .mcp.server import build_server

    worker = _worker_of()
    server = build_server(
        app, handshake_wait=_HANDSHAKE_WAIT_SECONDS if transport == "stdio" else 0.0, lead=worker is None
    )
    if transport == "stdio":
        names = ", ".join(kb.name for kb in app.config.kb)
        # stdout carries the protocol only; a person who started this in a terminal learns what it waits for.
        waiting = (
            f"mcp-kb: serving {len(app.config.kb)} knowledge base(s) ({names}) over stdio, waiting for an "
            f"MCP client on stdin/stdout; Ctrl-C stops"
        )
        anyio.run(_serve_stdio, server, waiting)
        return
    from .http.edge import AccessGate, Edge
    from .http.hooks import HookEndpoint
    from .http.network import listening_socket, rebinding_protection, server_url, warn_if_exposed

    allowed_hosts = app.config.server.allowed_hosts
    if worker is None:  # the lead said it
        warn_if_exposed(host, settings.guarded, allowed_hosts)
    edge = Edge(
        app.config, Gatekeeper(app.config) if settings.guarded else None, rebinding_protection(host, allowed_hosts)
    )
    asgi: Any = (
        server.sse_app(host=host, transport_security=edge.security)
        if transport == "sse"
        else server.streamable_http_app(host=host, transport_security=edge.security, stateless_http=settings.stateless)
    )
    from .ui.routes import page_app  # the page's templates load only for HTTP

    if edge.guarded:
        asgi = AccessGate(asgi, edge)
    asgi = _with_page(page_app(app, server.sync_runner, edge), asgi)
    asgi = _with_hooks(HookEndpoint(app.config, server.live_sync.request if server.live_sync else None), asgi)
    if worker is not None:
        _stop_with_the_lead(worker[1])
        _serve_http(asgi, socket.socket(fileno=worker[0]), settings, None)
        return
    sock = listening_socket(host, port)
    path = "/sse" if transport == "sse" else "/mcp"
    kind = "SSE" if transport == "sse" else f"{'stateless ' if settings.stateless else ''}streamable HTTP"
    processes = (
        f" from {settings.workers} processes (no sync tasks: a task lives in one)" if settings.workers > 1 else ""
    )
    with _workers(sock, settings.workers - 1, settings.cursor_secret):
        _serve_http(
            asgi,
            sock,
            settings,
            f"mcp-kb: serving {kind} at {server_url(host, sock.getsockname()[1], path)}"
            f"{processes} ({_admission(settings)}); admin page at "
            f"{server_url(host, sock.getsockname()[1], '/')}",
        )


@contextlib.contextmanager
def _workers(sock: socket.socket, count: int, cursor_secret: str | None) -> Iterator[None]:
    """`count` more processes serving `sock` while the block runs: this command again, each handed the socket, the
    cursors' key (a cursor from one is taken by any) and a pipe whose other end this process holds, so they stop
    when it does, however it ends. Never a fork: LanceDB's and ONNX Runtime's threads do not survive one."""
    if count == 0:
        yield
        return
    alive, held = os.pipe()
    environment = {
        **os.environ,
        _WORKER_OF: f"{sock.fileno()},{alive}",
        **({ENV_CURSOR_SECRET: cursor_secret} if cursor_secret else {}),
    }
    command = [sys.executable, "-m", "mcp_kb", *sys.argv[1:]]
    try:
        workers = [
            subprocess.Popen(command, env=environment, pass_fds=(sock.fileno(), alive), stdin=subprocess.DEVNULL)
            for _ in range(count)
        ]
    finally:
        os.close(alive)
    try:
        yield
    finally:
        os.close(held)  # each worker reads the end of its pipe and stops
        for process in workers:
            try:
                process.wait(_WORKER_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _worker_of() -> tuple[int, int] | None:
    """In a worker process: the listening socket it serves and its lead's pipe (file descriptors); else None."""
    given = os.environ.pop(_WORKER_OF, None)  # not for the processes it starts (parse workers)
    if not given:
        return None
    socket_fd, pipe_fd = (int(part) for part in given.split(","))
    return socket_fd, pipe_fd


def _stop_with_the_lead(pipe: int) -> None:
    """A worker stops (as on SIGTERM) when its lead's end of `pipe` closes: the lead stopped, or died."""

    def wait() -> None:
        while os.read(pipe, 1):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="mcp-kb-lead", daemon=True).start()


async def _serve_stdio(server: MCPServer, waiting: str) -> None:
    """stdio until the client closes it, or Ctrl-C / SIGTERM (a terminal's user, a client ending the server);
    `waiting` is said once both stop it."""
    served = threading.Event()
    if runner := getattr(server, "sync_runner", None):
        threading.Thread(target=_leave_a_sync_behind, args=(runner, served), daemon=True).start()
    try:
        async with anyio.create_task_group() as group:
            await group.start(_stop_on_signal, group.cancel_scope)
            print(waiting, file=sys.stderr, flush=True)
            await server.run_stdio_async()
            group.cancel_scope.cancel()
    finally:
        served.set()


def _leave_a_sync_behind(runner: SyncRunner, served: threading.Event) -> None:
    """A client stops a stdio server by closing its stdin and expects it gone: once the server stops, a running
    sync has until its next progress report, within _SYNC_STOP_SECONDS, to end; past that the server leaves
    without it. Cut short, it keeps what it committed, and the next sync goes on from there. (A model still
    loading holds the exit by design: no sync, no hurry.)"""
    runner.stopping.wait()
    if runner.syncing and not served.wait(_SYNC_STOP_SECONDS):
        print(f"mcp-kb: stopped; the running sync was cut short: {SYNC_WORK_KEPT}", file=sys.stderr, flush=True)
        os._exit(0)


async def _stop_on_signal(scope: anyio.CancelScope, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            print("mcp-kb: stopped", file=sys.stderr, flush=True)
            scope.cancel()
            # The SDK reads stdin in a thread that only a line or EOF wakes (a terminal's user sends neither):
            # past a short grace for the shutdown, leave without it. A sync cut short here is safe to cut:
            # what it committed stays and the next sync goes on from there.
            threading.Timer(_STOP_GRACE_SECONDS, os._exit, args=(128 + signum,)).start()
            return


def run_page(app: App, port: int) -> None:
    """`mcp-kb ui`: the admin page alone, for this machine only (the loopback address, the owner's grant), syncing
    through the same writer lock as every other process."""
    from .http.edge import Edge
    from .http.network import listening_socket, rebinding_protection, server_url
    from .ui.routes import page_app

    read_only = app.config.server.read_only
    edge = Edge(app.config, None, rebinding_protection(LOOPBACK, []))
    asgi = page_app(app, None if read_only else SyncRunner(app), edge)
    sock = listening_socket(LOOPBACK, port)
    _serve_http(
        asgi,
        sock,
        app.config.server,
        f"mcp-kb: admin page at {server_url(LOOPBACK, sock.getsockname()[1], '/')} (this machine only; Ctrl-C stops)",
    )


def _with_page(page: Any, mcp: Any) -> Any:
    """One HTTP app: the admin page's paths to the page, the rest (and the lifespan) to the MCP app."""
    from .ui.routes import is_page_path

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        target = page if scope["type"] == "http" and is_page_path(scope["path"]) else mcp
        await target(scope, receive, send)

    return asgi


def _with_hooks(hooks: Any, rest: Any) -> Any:
    """One HTTP app: the webhooks' paths to their handler, before any token gate (a forge signs, it sends no token),
    the rest (and the lifespan) as it was."""
    from .http.hooks import is_hook_path

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        target = hooks if scope["type"] == "http" and is_hook_path(scope["path"]) else rest
        await target(scope, receive, send)

    return asgi


def _serve_http(asgi: Any, sock: Any, settings: Any, announce: str | None) -> None:
    """Serve `asgi` on `sock` until Ctrl-C or SIGTERM; `announce` is said (a worker says nothing) once both stop
    it."""
    import uvicorn

    from .http.limits import RepeatedLineFilter, accept_burst, connection_cap, guarded_protocol

    for handler in logging.getLogger().handlers:  # a failure per connection must not fill the disk
        handler.addFilter(RepeatedLineFilter())
    cap = connection_cap(settings.max_connections)
    # log_config=None: uvicorn's lines go through this process's handlers (and their filter)
    uvicorn_config = uvicorn.Config(
        asgi,
        log_level="warning",
        log_config=None,
        backlog=accept_burst(cap),
        http=guarded_protocol(cap, settings.header_timeout),
        timeout_graceful_shutdown=1,
    )  # seconds: open streams do not hold it
    # uvicorn stops on Ctrl-C or SIGTERM and then raises the signal again: both end here, said in one line.
    if announce:
        print(announce, file=sys.stderr, flush=True)
    with sigterm_interrupts(), contextlib.suppress(KeyboardInterrupt):
        anyio.run(uvicorn.Server(uvicorn_config).serve, [sock])
    if announce:
        print("mcp-kb: stopped", file=sys.stderr, flush=True)


def _admission(settings: ServerConfig) -> str:
    """What an HTTP client must send, as the start line says it."""
    kinds = ["bearer token required"] if settings.token else []
    kinds += [f"{len(settings.tokens)} scoped token(s)"] if settings.tokens else []
    kinds += [f"OAuth access tokens from {settings.oauth.issuer}"] if settings.oauth else []
    return "; ".join(kinds) or "no token"
