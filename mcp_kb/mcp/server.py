"""The MCP server assembled: its tools (tools.py: a search tool per KB, one across them, or both, the tools that
read and list documents, the sync tool), resources, prompt and completions (resources.py), what it tells a model
(descriptions.py), each caller's view of them (guard.py), and its start-up: the handshake, the model's warm-up,
the KBs' sync triggers and the counts of what each KB's sync would do.

Known errors come back as `isError` results that say how to fix the call; the server keeps serving.
"""

import contextlib
import copy
import logging
import threading
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ValidationError

from ..api import (
    __version__,
    LIST_TOOL,
    LIST_URI,
    READ_TOOL,
    SEARCH_ALL_TOOL,
    WORKBENCH_TOOLS,
    App,
    BrowseRequest,
    CallerView,
    common_filter_types,
    KBError,
    LiveSync,
    ReadRequest,
    SearchRequest,
    status_uri,
    SyncRequest,
    SyncRunner,
)
from .compat import AnsweredStdio, PlainErrors, support_2025_clients, unknown_tool
from .guard import Guard
from .icons import icon
from .notify import Notifier
from .results_view import results_view
from .tasks import SyncShares, SyncTasks
from .schemas import argument_errors
from .descriptions import across_description, instructions, tool_description
from .tools import add_document_tools, add_search_across_tool, add_search_tool, add_sync_tool
from .resources import add_completions, add_prompt, add_resources

log = logging.getLogger(__name__)

_WARM_UP_GRACE_SECONDS = 30  # how long a closing server waits for the model load it started
_RECOUNT_SECONDS = 60.0  # how often a server counts again what each KB's sync would do (its tools' descriptions say it)
_HANDSHAKE_METHODS = ("initialize", "server/discover")  # a client's first requests, before it picks a tool


# ---- server ----------------------------------------------------------------------------------


class _KBServer(PlainErrors, AnsweredStdio):
    """An MCPServer that lists and calls only the tools of the caller's view, and whose rejected tool
    arguments read like the CLI's errors, not pydantic's."""

    def __init__(self, app: App, notifier: Notifier, guard: Guard, **settings: Any):
        super().__init__(**settings)
        self.kb_by_tool = {kb.search_tool_name: kb for kb in app.config.kb}
        self.common_filters = common_filter_types(app.config.kb) if app.config.kb else {}
        self.notifier = notifier
        self.guard = guard
        self.sync_runner: SyncRunner | None = None  # the one the sync tool uses (None: read-only); the page's too
        self.live_sync: LiveSync | None = None  # the KBs' sync triggers, which webhooks ask too (None: read-only)

    async def list_tools(self) -> list[Any]:
        view = self.guard.view()
        return [_as_seen_by(view, tool) for tool in await super().list_tools() if view.sees_tool(tool.name)]

    # the MCP SDK's MCPServer.call_tool signature, overridden
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if context is not None:
            self.notifier.seen(context.session)
        if not self.guard.view().sees_tool(name):
            raise unknown_tool(name)  # the SDK turns it into its answer for a tool it does not have
        return await super().call_tool(name, arguments, context)

    def argument_errors(self, tool: str, error: ValidationError) -> str:
        kb = self.kb_by_tool.get(tool)
        if kb is not None:
            return argument_errors(error, SearchRequest, kb.filter_field_types())
        if tool == SEARCH_ALL_TOOL:
            return argument_errors(error, SearchRequest, self.common_filters)
        requests: dict[str, type[BaseModel]] = {READ_TOOL: ReadRequest, LIST_TOOL: BrowseRequest}
        return argument_errors(error, requests.get(tool, SyncRequest))

    def prompt_error(self, error: BaseException) -> str:
        return self.guard.view().explain(error) if isinstance(error, KBError) else str(error)


def _as_seen_by(view: CallerView, tool: Any) -> Any:
    """A tool over every KB as one caller sees it: its KB arguments list only the KBs the caller may see, and the
    search across them describes those alone (tools of one KB are the same for every caller who sees them)."""
    if tool.name not in WORKBENCH_TOOLS:
        return tool
    schema = copy.deepcopy(tool.input_schema)
    for argument in ("kb", "kbs"):
        if argument in schema.get("properties", {}):
            _name_kbs(schema["properties"][argument], list(view.names))
    update: dict[str, object] = {"input_schema": schema}
    if tool.name == SEARCH_ALL_TOOL:
        update["description"] = across_description(view.kbs)
    return tool.model_copy(update=update)


def _name_kbs(schema: dict[str, object], names: list[str]) -> None:
    """The KB names as the enum of a text argument (or of its items, in each branch of a union)."""
    if schema.get("type") == "string":
        schema["enum"] = names
    branches = schema.get("anyOf", [])
    for branch in branches if isinstance(branches, list) else []:  # pydantic's JSON schema: a list of schemas
        _name_kbs(branch, names)
    if isinstance(items := schema.get("items"), dict):
        _name_kbs(items, names)


def build_server(app: App, read_only: bool | None = None, handshake_wait: float = 0.0, lead: bool = True) -> _KBServer:
    """An MCP server for every KB in the app's config. Its start-up work (loading the model, a start-up sync) waits
    up to `handshake_wait` seconds for a client's first request after its handshake to be answered: that work holds
    the interpreter as answering does, and a client that launches the server waits for those answers. Of several
    worker processes, only the `lead` runs the KBs' sync triggers (start-up, schedule, file changes); each process
    syncs for the pushes its webhooks take, through its own runner (the index's writer lock orders them); none offers
    sync tasks (a task lives in one)."""
    read_only = app.config.server.read_only if read_only is None else read_only
    app.saves_metrics = True  # a server's figures are the ones `mcp-kb stats` shows
    guard = Guard(app.config, instructions, app.audit)
    notifier = Notifier(CallerView.nobody(app.config))

    async def kb_synced(name: str) -> None:
        await notifier.updated(status_uri(name), name)
        await notifier.updated(LIST_URI, name)
        await counted(name)  # what a sync would do now: nothing, or what changed meanwhile
        await described(name)

    async def counted(name: str) -> None:
        try:
            await anyio.to_thread.run_sync(app.pending, name)
        except Exception as exc:  # a folder that fails to list, a store that fails: the next sync says why
            log.info("%s: what a sync would do was not counted: %s", name, exc)

    async def described(name: str) -> None:
        """The KB's tool re-registered when what its description says has changed."""
        kb = app.config.get_kb(name)
        if name in descriptions and descriptions[name] != tool_description(app, kb):
            # The description says what the KB holds and whether it is behind: re-register it, tell clients to re-list.
            server.remove_tool(kb.search_tool_name)
            descriptions[name] = add_search_tool(server, app, kb)
            await notifier.tools_changed(name)

    runner = SyncRunner(app, notify=kb_synced)
    live = None if read_only else LiveSync(runner, app.config.kb)

    tasks = None if read_only or app.config.server.workers > 1 else SyncTasks(guard.view)
    handshake = _Handshake()

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, object]]:
        _warn_about_missing_paths(app)
        if read_only and any(kb.sync.has_triggers for kb in app.config.kb):
            log.info("read-only: the [kb.sync] triggers in the config are left to the writer (`mcp-kb watch`)")

        async def answered() -> None:
            await handshake.wait(handshake_wait)

        async def live_sync(syncing: LiveSync) -> None:  # start-up, schedule, file changes; pushes
            await answered()  # a start-up sync loads LanceDB: after the first answer, not beside it
            await syncing.run(triggers=lead)

        async def described_as_counted(warmed: anyio.Event) -> None:
            """A KB behind its sources says so in its tool's description: counted by the warm-up, then every
            _RECOUNT_SECONDS (files change, and another process may sync: `mcp-kb watch`, a worker, a terminal)."""
            await warmed.wait()
            while True:
                for kb in app.config.kb:
                    await described(kb.name)
                await anyio.sleep(_RECOUNT_SECONDS)
                for kb in app.config.kb:
                    await counted(kb.name)

        async with warming_up(app, answered) as warmed, anyio.create_task_group() as group:
            group.start_soon(described_as_counted, warmed)
            if tasks:
                tasks.group = group  # sync tasks outlive the requests that start them
            if live:  # a read-only server never writes: another process (`mcp-kb watch`) syncs
                group.start_soon(live_sync, live)
            yield {}
            runner.stop()  # a running sync must not hold a server its client ended: it stops, keeping whole batches
            group.cancel_scope.cancel()

    server = _KBServer(
        app,
        notifier,
        guard,
        name="mcp-kb",
        title="Knowledge bases",
        version=__version__,
        icons=icon("icon"),
        instructions=instructions(guard.owner),
        subscriptions=notifier.bus,
        lifespan=lifespan,
        log_level="WARNING",
        middleware=[handshake, guard],
        extensions=[results_view(), *([tasks] if tasks else [])],
    )
    # Registered as some caller may be listed them; each caller's list is decided by what it sees (CallerView).
    everyone = len(app.config.kb)
    descriptions = (
        {kb.name: add_search_tool(server, app, kb) for kb in app.config.kb}
        if app.config.tools_of_each_kb(seen=1)
        else {}
    )  # a caller who sees one KB: the most who get one each
    if app.config.kb:
        add_document_tools(server, app, guard)
        if app.config.tool_across_kbs(everyone):
            add_search_across_tool(server, app, guard, server.common_filters)
    if not read_only:
        add_sync_tool(server, runner, guard, SyncShares())
        server.sync_runner = runner
        server.live_sync = live
    add_resources(server, app, guard)
    add_prompt(server, guard)
    add_completions(server, app, guard)
    support_2025_clients(server, notifier.subscribe, notifier.unsubscribe)
    return server


class _Handshake:
    """Middleware: says when the server has answered a client's first request after its handshake (tools/list,
    usually), which the start-up work waits for."""

    def __init__(self) -> None:
        self._answered = False
        self._waiting: set[anyio.Event] = set()  # one per wait, made in its own event loop (a server may run again)

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.request_id is not None and ctx.method not in _HANDSHAKE_METHODS:  # a request, answered
                self._answered = True
                for event in self._waiting:
                    event.set()

    async def wait(self, seconds: float) -> None:
        """Until such a request has been answered, or `seconds` have passed (0: no wait)."""
        if self._answered or seconds <= 0:
            return
        event = anyio.Event()
        self._waiting.add(event)
        try:
            with anyio.move_on_after(seconds):
                await event.wait()
        finally:
            self._waiting.discard(event)


@asynccontextmanager
async def warming_up(
    app: App, ready: Callable[[], Awaitable[None]], grace_seconds: float = _WARM_UP_GRACE_SECONDS
) -> AsyncIterator[anyio.Event]:
    """Load the embedding model (and count what each KB's sync would do) in the background once `ready` returns; on
    leaving before, never. Yields an event set once that is done. On leaving after, wait for the load up to the
    grace: a client that leaves at once would otherwise end the process while the model loads in native code, which
    aborts the interpreter's shutdown ("Fatal Python error: PyGILState_Release")."""
    warmed = anyio.Event()
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            _warm_up(app)
        finally:
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile: nobody waits for it
                anyio.from_thread.run_sync(warmed.set, token=token)

    warm_up = threading.Thread(target=work, name="mcp-kb-warm-up", daemon=True)

    async def start() -> None:
        await ready()
        warm_up.start()

    async with anyio.create_task_group() as group:
        group.start_soon(start)
        try:
            yield warmed
        finally:
            group.cancel_scope.cancel()
            if warm_up.ident is not None:  # started
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(warm_up.join, grace_seconds)


def _warm_up(app: App) -> None:
    """What a server loads once it has answered its first request: the model, and what each KB's sync would do (a KB
    behind its sources says so in its tool's description)."""
    try:
        app.warm_up()
    except Exception as exc:  # reported again, with its fix, on the first search that needs it
        app.log_problem("embedding model not loaded", exc)
    for kb in app.config.kb:
        try:
            app.pending(kb.name)
        except Exception as exc:  # a folder that fails to list, a store that fails: the next sync says why
            log.info("%s: what a sync would do was not counted: %s", kb.name, exc)


def _warn_about_missing_paths(app: App) -> None:
    """A KB whose folder is gone is still served from its index; say so once at start."""
    for kb in app.config.kb:
        for path in kb.paths:
            if not path.exists():
                log.warning("%s: %s does not exist (not mounted?); serving the index as last synced", kb.name, path)
