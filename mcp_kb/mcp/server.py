"""The MCP server: search tools (one per KB, one across them, or both), tools that read and list documents, a
sync tool, status resources and a citation prompt.

Tool bodies validate, call the App (in a worker thread, so a long sync or a model load never
blocks other requests) and format. Known errors come back as `isError` results that say how to
fix the call; the server keeps serving.
"""

# No `from __future__ import annotations`: tool signatures are built at run time from per-KB
# filter models, and the SDK reads the evaluated annotations.

import contextlib
import copy
import inspect
import logging
import threading
from contextlib import asynccontextmanager, contextmanager
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import (
    CallToolResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceLink,
    ResourceTemplateReference,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field, ValidationError

from ..api import (
    __version__,
    ACROSS_KBS,
    CITATION_FORMAT,
    DOCUMENT_URI,
    LIST_TOOL,
    LIST_URI,
    METRICS_URI,
    READ_TOOL,
    SEARCH_ALL_TOOL,
    STATUS_URI,
    SYNC_TOOL,
    WORKBENCH_TOOLS,
    App,
    as_sentence,
    BrowseOutput,
    BrowseRequest,
    ListingOrder,
    CallerView,
    citation_marker,
    common_filter_types,
    described,
    document_uri,
    Hit,
    KBError,
    LiveSync,
    ReadOutput,
    ReadRequest,
    SearchOutput,
    SearchRequest,
    SearchResult,
    status_uri,
    SyncRequest,
    SyncRunner,
    sync_named,
    NEVER_SYNCED,
)
from ..present import browse_text, cited_text, json_text, read_text, sync_text
from ..settings import MODES_TEXT, KBConfig, SearchMode
from .compat import AnsweredStdio, PlainErrors, support_2025_clients, unknown_tool
from .guard import Guard, count_answer, current_view
from .icons import icon
from .notify import Notifier
from .results_view import results_view, view_meta
from .tasks import SyncShares, SyncTasks, task_progress
from .schemas import SyncOutput, argument_errors, common_filters_model, filters_model

log = logging.getLogger(__name__)
_T = TypeVar("_T")

PROMPT = "answer_with_citations"

_WARM_UP_GRACE_SECONDS = 30  # how long a closing server waits for the model load it started
_RECOUNT_SECONDS = 60.0  # how often a server counts again what each KB's sync would do (its tools' descriptions say it)
_HANDSHAKE_METHODS = ("initialize", "server/discover")  # a client's first requests, before it picks a tool


def _filters_dict(filters: BaseModel | None) -> dict[str, Any] | None:
    return filters.model_dump(exclude_none=True) if filters is not None else None


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
    update: dict[str, Any] = {"input_schema": schema}
    if tool.name == SEARCH_ALL_TOOL:
        update["description"] = _across_description(view.kbs)
    return tool.model_copy(update=update)


def _name_kbs(schema: dict[str, Any], names: list[str]) -> None:
    """The KB names as the enum of a text argument (or of its items, in each branch of a union)."""
    if schema.get("type") == "string":
        schema["enum"] = names
    for branch in schema.get("anyOf", []):
        _name_kbs(branch, names)
    if isinstance(schema.get("items"), dict):
        _name_kbs(schema["items"], names)


def build_server(app: App, read_only: bool | None = None, handshake_wait: float = 0.0, lead: bool = True) -> _KBServer:
    """An MCP server for every KB in the app's config. Its start-up work (loading the model, a start-up sync) waits
    up to `handshake_wait` seconds for a client's first request after its handshake to be answered: that work holds
    the interpreter as answering does, and a client that launches the server waits for those answers. Of several
    worker processes, only the `lead` runs the KBs' sync triggers (start-up, schedule, file changes); each process
    syncs for the pushes its webhooks take, through its own runner (the index's writer lock orders them); none offers
    sync tasks (a task lives in one)."""
    read_only = app.config.server.read_only if read_only is None else read_only
    app.saves_metrics = True  # a server's figures are the ones `mcp-kb stats` shows
    guard = Guard(app.config, _instructions, app.audit)
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
        if name in descriptions and descriptions[name] != _tool_description(app, kb):
            # The description says what the KB holds and whether it is behind: re-register it, tell clients to re-list.
            server.remove_tool(kb.search_tool_name)
            descriptions[name] = _add_search_tool(server, app, kb)
            await notifier.tools_changed(name)

    runner = SyncRunner(app, notify=kb_synced)
    live = None if read_only else LiveSync(runner, app.config.kb)

    tasks = None if read_only or app.config.server.workers > 1 else SyncTasks(guard.view)
    handshake = _Handshake()

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
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
        instructions=_instructions(guard.owner),
        subscriptions=notifier.bus,
        lifespan=lifespan,
        log_level="WARNING",
        middleware=[handshake, guard],
        extensions=[results_view(), *([tasks] if tasks else [])],
    )
    # Registered as some caller may be listed them; each caller's list is decided by what it sees (CallerView).
    everyone = len(app.config.kb)
    descriptions = (
        {kb.name: _add_search_tool(server, app, kb) for kb in app.config.kb}
        if app.config.tools_of_each_kb(seen=1)
        else {}
    )  # a caller who sees one KB: the most who get one each
    if app.config.kb:
        _add_document_tools(server, app, guard)
        if app.config.tool_across_kbs(everyone):
            _add_search_across_tool(server, app, guard)
    if not read_only:
        _add_sync_tool(server, runner, guard, SyncShares())
        server.sync_runner = runner
        server.live_sync = live
    _add_resources(server, app, guard)
    _add_prompt(server, guard)
    _add_completions(server, app, guard)
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


def _instructions(view: CallerView) -> str:
    """The handshake's instructions, naming the KBs this caller may see (and no other), and the tools to use."""
    lines = []
    if view.tools_of_each_kb:
        across = f", or {SEARCH_ALL_TOOL} for all at once" if view.tool_across_kbs else ""
        lines.append(
            f"Knowledge bases to search, one tool each: use the one whose description fits the question, "
            f"and search several when unsure{across}."
        )
        lines += [f"- {kb.search_tool_name}: {as_sentence(kb.description)}" for kb in view.kbs]
    else:
        lines.append(f"Search the knowledge bases with {SEARCH_ALL_TOOL} (all at once, or the ones you name):")
        lines += [f"- {kb.name}: {_clipped(as_sentence(kb.description))}" for kb in view.kbs]
    lines += [
        f"Cite results as {citation_marker(1)} with their source ({CITATION_FORMAT}). When a passage is not "
        f"enough, read more of its document with {READ_TOOL} (the section its citation names, or on from the "
        f"passage); {LIST_TOOL} lists a knowledge base's documents and a document's outline."
    ]
    return "\n".join(lines)


_DESCRIPTION_CHARS = 200  # of a KB's description, in the list a search across KBs gives


def _clipped(text: str) -> str:
    return text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 1] + "…"


def _across_description(kbs: Sequence[KBConfig]) -> str:
    """The search across KBs described with the KBs a caller sees, one line each."""
    lines = [
        f"Search these knowledge bases at once: passages of all of them ranked together, each naming its "
        f"knowledge base, with numbered citations ({CITATION_FORMAT}). Name some in kbs to search only those. "
        f"Modes: {MODES_TEXT}. Knowledge bases:"
    ]
    lines += [f"- {kb.name}: {_clipped(as_sentence(kb.description))}" for kb in kbs]
    return "\n".join(lines)


def _tool_description(app: App, kb: KBConfig) -> str:
    """The KB's own description plus what it holds, so the model picks the right tool."""
    summary = app.summary(kb.name)
    kinds = ", ".join(f"{n} {kind}" for kind, n in list(summary.kinds.items())[:5])
    titles = "; ".join(summary.titles)
    if summary.documents:
        holds = f" Holds {summary.documents} documents ({kinds}){f', among them: {titles}' if titles else ''}."
    else:
        holds = f" {_not_holding(app, kb)}"
    versions = (
        f" Versions: {', '.join(v.name for v in kb.versions)} (searched: `version`, default "
        f"{kb.default_version}; a citation's path begins with its version)."
        if kb.versions
        else ""
    )
    pending = app.pending_known(kb.name)
    behind = (
        f" Behind its sources ({pending.text()}): answers may be out of date until it is synced."
        if pending and pending.behind
        else ""
    )
    return (
        f"{as_sentence(kb.description)}{holds}{versions}{behind} Returns passages with numbered citations "
        f"({CITATION_FORMAT}). Modes: {MODES_TEXT}."
    )


def _not_holding(app: App, kb: KBConfig) -> str:
    """Why a KB's tool finds nothing yet, as things stand: a sync runs, none has run (and none will by itself),
    the last one failed, or it found no documents."""
    glance = app.glance(kb.name)
    if glance.sync_running:
        return "Not indexed yet: its first sync is running."
    if glance.last_outcome == NEVER_SYNCED:
        if kb.sync.on_start:
            return "Not indexed yet: its first sync starts with the server."
        return f"Not indexed yet: no sync has run ({sync_named()} indexes it)."
    if glance.last_outcome != "ok":
        return f"Not indexed: its last sync did not finish ({glance.last_outcome}; the status resource says why)."
    return "Holds no documents yet: its last sync found none."


def _search_field(name: str, strict: bool = True) -> Any:
    """A search tool parameter as requests.SearchRequest declares it; JSON numbers and text strictly typed."""
    return described(SearchRequest, name, strict=strict)


def _sync_field(name: str) -> Any:
    return described(SyncRequest, name, strict=True)


def _add_search_tool(server: MCPServer, app: App, kb: KBConfig) -> str:
    """Register the KB's search tool; returns the description it was given."""
    Filters = filters_model(kb)
    # A KB of library versions names them as the enum of `version`; a KB of one version has no such argument.
    Versions = Literal[tuple(v.name for v in kb.versions)] if kb.versions else str

    async def search_tool(  # noqa: PLR0913  # one per tool parameter
        query: Annotated[str, _search_field("query")],
        top_k: Annotated[int, _search_field("top_k")] = kb.search.top_k,
        mode: Annotated[SearchMode, _search_field("mode", strict=False)] = kb.search.mode,
        min_score: Annotated[float | None, _search_field("min_score")] = None,
        filters: Annotated[
            Filters | None,  # type: ignore[valid-type]  # built per KB at run time
            _search_field("filters", strict=False),
        ] = None,
        context: Annotated[int, _search_field("context")] = SearchRequest.model_fields["context"].default,
        max_per_document: Annotated[int, _search_field("max_per_document")] = kb.search.max_per_document,
        max_tokens: Annotated[int, _search_field("max_tokens")] = kb.search.max_tokens,
        as_of: Annotated[str | None, _search_field("as_of")] = None,
        version: Annotated[Versions, _search_field("version", strict=False)] = kb.default_version,  # type: ignore[valid-type]
    ) -> Annotated[CallToolResult, SearchOutput]:
        # The SDK checked these arguments against SearchRequest's own fields (the parameters above): built as
        # they are, not validated a second time.
        request = SearchRequest.model_construct(
            query=query,
            top_k=top_k,
            mode=mode,
            min_score=min_score,
            filters=_filters_dict(filters),
            context=context,
            max_per_document=max_per_document,
            max_tokens=max_tokens,
            as_of=as_of,
            version=version,
        )
        result: SearchResult = await _call(lambda: app.search(kb.name, request))
        count_answer(len(result.hits))
        return CallToolResult(
            content=[TextContent(type="text", text=cited_text(result)), *_document_links(kb.name, result.hits)],
            structured_content=result.as_dict(),
        )

    if not kb.versions:  # the SDK reads the parameters from the signature
        signature = inspect.signature(search_tool)
        search_tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p for p in signature.parameters.values() if p.name != "version"]
        )
    description = _tool_description(app, kb)
    server.add_tool(
        search_tool,
        name=kb.search_tool_name,
        title=f"Search {kb.name}",
        description=description,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        icons=icon("search"),
        meta=view_meta(),
    )
    return description


def _document_links(kb: str, hits: Sequence[Hit]) -> list[ResourceLink]:
    """A link per hit to its document's resource, so a client can open the source a passage cites."""
    return [_document_link(kb, number, hit) for number, hit in enumerate(hits, start=1)]


def _document_link(kb: str, number: int, hit: Hit) -> ResourceLink:
    return ResourceLink(
        type="resource_link",
        uri=document_uri(kb, hit.source),
        name=hit.source,
        title=f"{citation_marker(number)} {hit.citation}",
        mime_type="text/plain",
    )


def _read_field(name: str) -> Any:
    return described(ReadRequest, name, strict=True)


def _browse_field(name: str) -> Any:
    return described(BrowseRequest, name, strict=True)


def _add_document_tools(server: MCPServer, app: App, guard: Guard) -> None:
    """Reading a document and listing documents, from the index, for every KB a caller sees (its `kb` argument)."""

    async def read_document(  # noqa: PLR0913  # one per tool parameter
        kb: Annotated[str, _read_field("kb")],
        path: Annotated[str, _read_field("path")] = "",
        section: Annotated[str | None, _read_field("section")] = None,
        pages: Annotated[str | None, _read_field("pages")] = None,
        lines: Annotated[str | None, _read_field("lines")] = None,
        chunk: Annotated[int | None, _read_field("chunk")] = None,
        max_tokens: Annotated[int, _read_field("max_tokens")] = ReadRequest.model_fields["max_tokens"].default,
        cursor: Annotated[str | None, _read_field("cursor")] = None,
        as_of: Annotated[str | None, _read_field("as_of")] = None,
    ) -> Annotated[CallToolResult, ReadOutput]:
        request = ReadRequest.model_construct(
            kb=kb,
            path=path,
            section=section,
            pages=pages,
            lines=lines,
            chunk=chunk,
            max_tokens=max_tokens,
            cursor=cursor,
            as_of=as_of,
        )
        answer = await _call(lambda: app.read(guard.view().check(kb), request))
        return CallToolResult(
            content=[TextContent(type="text", text=read_text(answer))],
            structured_content=answer.model_dump(mode="json"),
        )

    async def list_documents(  # noqa: PLR0913  # one per tool parameter
        kb: Annotated[str, _browse_field("kb")],
        path: Annotated[str, _browse_field("path")] = "",
        outline: Annotated[bool, _browse_field("outline")] = False,
        sort: Annotated[ListingOrder, described(BrowseRequest, "sort")] = "path",
        limit: Annotated[int, _browse_field("limit")] = BrowseRequest.model_fields["limit"].default,
        cursor: Annotated[str | None, _browse_field("cursor")] = None,
        as_of: Annotated[str | None, _browse_field("as_of")] = None,
    ) -> Annotated[CallToolResult, BrowseOutput]:
        request = BrowseRequest.model_construct(
            kb=kb, path=path, outline=outline, sort=sort, limit=limit, cursor=cursor, as_of=as_of
        )
        answer = await _call(lambda: app.browse(guard.view().check(kb), request))
        return CallToolResult(
            content=[TextContent(type="text", text=browse_text(answer))],
            structured_content=answer.model_dump(mode="json"),
        )

    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(
        read_document,
        name=READ_TOOL,
        title="Read a document",
        description="Read a document of a knowledge base from its index: whole, one section (the "
        "heading path a search result's citation shows), pages, lines, or on from a "
        "passage (its chunk_index). Each answer fits max_tokens, says which lines (and "
        "pages) it holds, and gives a cursor to read on.",
        annotations=reading,
        icons=icon("search"),
    )
    server.add_tool(
        list_documents,
        name=LIST_TOOL,
        title="List documents",
        description="List a knowledge base's documents (all, under a path prefix, or matching a glob; "
        "by path or last changed first) with title, kind, size, pages and tokens; or, with "
        "outline, one document's headings with their lines, pages and size, to read a "
        f"section with {READ_TOOL}. Paged with a cursor.",
        annotations=reading,
        icons=icon("search"),
    )


_MAX_KBS_NAMED = 1_000  # names in one search's `kbs`: more than any config holds, fewer than a flood


def _add_search_across_tool(server: _KBServer, app: App, guard: Guard) -> None:
    """One search over every KB the caller sees (or those it names), filtering on the fields all KBs have."""
    Filters = common_filters_model(server.common_filters)
    defaults = SearchRequest.model_fields

    async def search_knowledge_bases(  # noqa: PLR0913  # one per tool parameter
        query: Annotated[str, _search_field("query")],
        kbs: Annotated[
            list[str] | None,
            Field(None, max_length=_MAX_KBS_NAMED, description="Only these knowledge bases (default: all)"),
        ] = None,
        top_k: Annotated[int, _search_field("top_k")] = ACROSS_KBS.top_k,
        mode: Annotated[SearchMode, _search_field("mode", strict=False)] = ACROSS_KBS.mode,
        min_score: Annotated[float | None, _search_field("min_score")] = None,
        filters: Annotated[
            Filters | None,  # type: ignore[valid-type]  # built at run time
            _search_field("filters", strict=False),
        ] = None,
        context: Annotated[int, _search_field("context")] = defaults["context"].default,
        max_tokens: Annotated[int, _search_field("max_tokens")] = ACROSS_KBS.max_tokens,
    ) -> Annotated[CallToolResult, SearchOutput]:
        request = SearchRequest.model_construct(
            query=query,
            top_k=top_k,
            mode=mode,
            min_score=min_score,
            filters=_filters_dict(filters),
            context=context,
            max_tokens=max_tokens,
        )

        def search() -> SearchResult:
            view = guard.view()
            return app.search_across([view.check(name) for name in kbs] if kbs else list(view.names), request)

        result: SearchResult = await _call(search)
        count_answer(len(result.hits))
        links = [_document_link(hit.kb, number, hit) for number, hit in enumerate(result.hits, start=1)]
        return CallToolResult(
            content=[TextContent(type="text", text=cited_text(result, name_kb=True)), *links],
            structured_content=result.as_dict(),
        )

    server.add_tool(
        search_knowledge_bases,
        name=SEARCH_ALL_TOOL,
        title="Search knowledge bases",
        description=_across_description(app.config.kb),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        icons=icon("search"),
        meta=view_meta(),
    )


@contextmanager
def _client_errors(error: type[Exception] = ToolError) -> Iterator[None]:
    """Failures reach the client as `error` (the SDK hides other exceptions' text) with a useful message."""
    try:
        yield
    except KBError as exc:
        view = current_view()
        raise error(view.explain(exc) if view else str(exc)) from exc
    except Exception as exc:
        log.exception("request failed")
        view = current_view()
        said = f"internal error ({type(exc).__name__}: {exc}); the server is still running"
        raise error(view.unlocated(said) if view else said) from exc


async def _call(work: Callable[[], _T], error: type[Exception] = ToolError) -> _T:
    """Run blocking work in a thread, translating its failures for the client."""
    with _client_errors(error):
        return await anyio.to_thread.run_sync(work)


def _add_sync_tool(server: MCPServer, runner: SyncRunner, guard: Guard, shares: SyncShares) -> None:
    """The sync tool; `shares` bounds each caller's syncs that wait or run (a task's too: it calls the tool)."""

    async def sync_tool(  # noqa: PLR0913  # one per tool parameter
        ctx: Context,
        kb: Annotated[str | None, _sync_field("kb")] = None,
        full: Annotated[bool, _sync_field("full")] = False,
        reembed: Annotated[bool, _sync_field("reembed")] = False,
        allow_mass_delete: Annotated[bool, _sync_field("allow_mass_delete")] = False,
        wait: Annotated[bool, _sync_field("wait")] = SyncRequest.model_fields["wait"].default,
        tag: Annotated[str | None, _sync_field("tag")] = None,
    ) -> Annotated[CallToolResult, SyncOutput]:
        def report(done: int, total: int, message: str) -> None:
            anyio.from_thread.run(ctx.report_progress, done, total, message)

        progress = task_progress() or report  # as a task, the client reads progress with tasks/get
        view = guard.view()
        asked = SyncRequest.model_construct(
            kb=kb,
            full=full,
            reembed=reembed,
            allow_mass_delete=allow_mass_delete,
            wait=wait,
            tag=tag,
            by=view.grant.who.label,
        )  # checked by the SDK
        with _client_errors(), shares.held(view.who):
            reports = []
            for name in view.syncable(kb):
                reports += await runner.sync(asked.model_copy(update={"kb": name}), progress)
        count_answer(len(reports))
        output = SyncOutput(reports=[r.as_dict() for r in reports], summary="\n".join(r.summary() for r in reports))
        return CallToolResult(
            content=[TextContent(type="text", text=sync_text(reports))],
            structured_content=output.model_dump(mode="json"),
        )

    server.add_tool(
        sync_tool,
        name=SYNC_TOOL,
        title="Sync knowledge bases",
        description="Index new and changed files and remove deleted ones (incremental; only changed "
        "content is embedded). Returns a report per knowledge base.",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
        icons=icon("sync"),
    )


def _add_resources(server: MCPServer, app: App, guard: Guard) -> None:
    @server.resource(
        LIST_URI,
        name="knowledge-bases",
        mime_type="application/json",
        description="Every knowledge base with its sync status",
    )
    async def list_kbs() -> str:
        names = guard.view().names
        statuses = await _call(lambda: [status for name in names for status in app.status(name)], ResourceError)
        return json_text(statuses)

    @server.resource(
        STATUS_URI,
        name="kb-status",
        mime_type="application/json",
        description="Sync status of one knowledge base: last sync, counts, failures, model, index version",
    )
    async def kb_status(name: str) -> str:
        [status] = await _call(lambda: app.status(guard.view().check(name)), ResourceError)
        return json_text(status)

    @server.resource(
        METRICS_URI,
        name="kb-metrics",
        mime_type="application/json",
        description="Health of one knowledge base: searches, latency per stage (p50/p95/max), cache "
        "hits, degraded and empty answers, tokens embedded, the latest hit rate",
    )
    async def kb_metrics(name: str) -> str:
        return json_text(await _call(lambda: app.live_stats(guard.view().check(name)), ResourceError))

    @server.resource(
        DOCUMENT_URI,
        name="kb-document",
        mime_type="text/plain",
        description="Extracted text of one source document of a knowledge base",
    )
    async def kb_document(name: str, path: str) -> str:
        def read() -> str:
            return app.document_text(guard.view().check(name), path)

        return await _call(read, ResourceError)


def _add_prompt(server: MCPServer, guard: Guard) -> None:

    @server.prompt(
        name=PROMPT,
        title="Answer with citations",
        description=f"Answer a question only from passages retrieved from the knowledge bases, citing them as {citation_marker(1)}",
    )
    def answer_with_citations(question: str, kb: str | None = None) -> list[UserMessage]:
        view = guard.view()
        if not view.tools_of_each_kb:
            tool = f"{SEARCH_ALL_TOOL}{f' with kbs=[{view.kb(kb).name!r}]' if kb else ''}"
        elif kb:
            tool = view.kb(kb).search_tool_name
        else:
            tools = (known.search_tool_name for known in view.kbs)
            tool = "the right one of: " + ", ".join(tools)
        return [
            UserMessage(
                "Answer the question below using only passages retrieved with the knowledge-base search "
                f"tool ({tool}).\n"
                "Rules:\n"
                "1. Search first; search again with other words if the passages do not answer it.\n"
                "2. Use only what the passages say. If they do not contain the answer, say so plainly "
                "instead of guessing.\n"
                f"3. Cite every claim with the passage number in square brackets, e.g. {citation_marker(1)} or "
                f"{citation_marker(2)}{citation_marker(3)}, and end "
                f"with a list of the cited sources ({CITATION_FORMAT}).\n"
                "4. Answer in the language of the question.\n\n"
                f"Question: {question}"
            )
        ]


_MAX_COMPLETIONS = 100  # the most values one completion answer may carry (the spec's limit)
_KB_ARGUMENTS = {PROMPT: "kb", STATUS_URI: "name", METRICS_URI: "name", DOCUMENT_URI: "name"}


def _add_completions(server: MCPServer, app: App, guard: Guard) -> None:
    """A client completes the KB a prompt or resource asks for from the KBs the caller may see, and a
    document's path from what that KB's index holds."""

    @server.completion()  # type: ignore[untyped-decorator, no-untyped-call]  # the SDK's decorator has no types
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        view = guard.view()
        about = ref.name if isinstance(ref, PromptReference) else ref.uri
        if _KB_ARGUMENTS.get(about) == argument.name:
            values = sorted(name for name in view.names if name.startswith(argument.value))
            total = len(values)
        elif about == DOCUMENT_URI and argument.name == "path":
            kb = ((context.arguments if context else None) or {}).get("name", "")
            if not view.sees(kb):
                return None
            values, total = await anyio.to_thread.run_sync(_synced_documents, app, kb, argument.value)
        else:
            return None
        return Completion(values=values[:_MAX_COMPLETIONS], total=total, has_more=total > _MAX_COMPLETIONS)


def _synced_documents(app: App, kb: str, prefix: str) -> tuple[list[str], int]:
    """The documents a KB's index holds under `prefix`, as callers may see them (its own filter applies)."""
    try:
        return app.documents_under(kb, prefix, _MAX_COMPLETIONS)
    except KBError:  # not synced yet: nothing to offer
        return [], 0
