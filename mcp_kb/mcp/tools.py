"""The MCP tools: a search tool per KB, the search across KBs, the tools that read and list documents, and
the sync tool. Each validates (the SDK, from the request models), calls the App through `call_core` and words the
answer (present.py)."""

# No `from __future__ import annotations`: tool signatures are built at run time from per-KB
# filter models, and the SDK reads the evaluated annotations.

import inspect
import logging
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

from ..api import (
    ACROSS_KBS,
    LIST_TOOL,
    READ_TOOL,
    SEARCH_ALL_TOOL,
    SYNC_TOOL,
    App,
    BrowseOutput,
    BrowseRequest,
    ListingOrder,
    citation_marker,
    described,
    document_uri,
    Hit,
    ReadOutput,
    ReadRequest,
    SearchOutput,
    SearchRequest,
    SearchResult,
    SyncRequest,
    SyncRunner,
)
from ..present import browse_text, cited_text, read_text, sync_text
from ..settings import KBConfig, SearchMode
from .guard import Guard, count_answer
from .icons import icon
from .results_view import view_meta
from .tasks import SyncShares, task_progress
from .schemas import SyncOutput, common_filters_model, filters_model
from .calls import call_core, client_errors
from .descriptions import across_description, tool_description


log = logging.getLogger(__name__)


def _filters_dict(filters: BaseModel | None) -> dict[str, object] | None:
    return filters.model_dump(exclude_none=True) if filters is not None else None


def _search_field(name: str, strict: bool = True) -> Any:
    """A search tool parameter as requests.SearchRequest declares it; JSON numbers and text strictly typed."""
    return described(SearchRequest, name, strict=strict)


def _sync_field(name: str) -> Any:
    return described(SyncRequest, name, strict=True)


def add_search_tool(server: MCPServer, app: App, kb: KBConfig) -> str:
    """Register the KB's search tool; returns the description it was given."""
    Filters = filters_model(kb)
    # A KB of library versions names them as the enum of `version`; a KB of one version has no such argument.
    Versions = Literal[tuple(v.name for v in kb.versions)] if kb.versions else str

    async def search_tool(
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
        result: SearchResult = await call_core(lambda: app.search(kb.name, request))
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
    description = tool_description(app, kb)
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


def add_document_tools(server: MCPServer, app: App, guard: Guard) -> None:
    """Reading a document and listing documents, from the index, for every KB a caller sees (its `kb` argument)."""

    async def read_document(
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
        answer = await call_core(lambda: app.read(guard.view().check(kb), request))
        return CallToolResult(
            content=[TextContent(type="text", text=read_text(answer))],
            structured_content=answer.model_dump(mode="json"),
        )

    async def list_documents(
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
        answer = await call_core(lambda: app.browse(guard.view().check(kb), request))
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


def add_search_across_tool(server: MCPServer, app: App, guard: Guard, common_filters: dict[str, str]) -> None:
    """One search over every KB the caller sees (or those it names), filtering on `common_filters`, the fields all
    KBs have."""
    Filters = common_filters_model(common_filters)
    defaults = SearchRequest.model_fields

    async def search_knowledge_bases(
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

        result: SearchResult = await call_core(search)
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
        description=across_description(app.config.kb),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        icons=icon("search"),
        meta=view_meta(),
    )


def add_sync_tool(server: MCPServer, runner: SyncRunner, guard: Guard, shares: SyncShares) -> None:
    """The sync tool; `shares` bounds each caller's syncs that wait or run (a task's too: it calls the tool)."""

    async def sync_tool(
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
        with client_errors(), shares.held(view.who):
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
