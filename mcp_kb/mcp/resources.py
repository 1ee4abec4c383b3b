"""The MCP resources (the KBs' status and metrics, documents), the citation prompt and the completions of their
arguments."""

from __future__ import annotations

import logging

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from ..api import (
    CITATION_FORMAT,
    DOCUMENT_URI,
    LIST_URI,
    METRICS_URI,
    SEARCH_ALL_TOOL,
    STATUS_URI,
    App,
    citation_marker,
    KBError,
)
from ..present import json_text
from .guard import Guard
from .calls import call_core


log = logging.getLogger(__name__)

PROMPT = "answer_with_citations"


def add_resources(server: MCPServer, app: App, guard: Guard) -> None:
    @server.resource(
        LIST_URI,
        name="knowledge-bases",
        mime_type="application/json",
        description="Every knowledge base with its sync status",
    )
    async def list_kbs() -> str:
        names = guard.view().names
        statuses = await call_core(lambda: [status for name in names for status in app.status(name)], ResourceError)
        return json_text(statuses)

    @server.resource(
        STATUS_URI,
        name="kb-status",
        mime_type="application/json",
        description="Sync status of one knowledge base: last sync, counts, failures, model, index version",
    )
    async def kb_status(name: str) -> str:
        [status] = await call_core(lambda: app.status(guard.view().check(name)), ResourceError)
        return json_text(status)

    @server.resource(
        METRICS_URI,
        name="kb-metrics",
        mime_type="application/json",
        description="Health of one knowledge base: searches, latency per stage (p50/p95/max), cache "
        "hits, degraded and empty answers, tokens embedded, the latest hit rate",
    )
    async def kb_metrics(name: str) -> str:
        return json_text(await call_core(lambda: app.live_stats(guard.view().check(name)), ResourceError))

    @server.resource(
        DOCUMENT_URI,
        name="kb-document",
        mime_type="text/plain",
        description="Extracted text of one source document of a knowledge base",
    )
    async def kb_document(name: str, path: str) -> str:
        def read() -> str:
            return app.document_text(guard.view().check(name), path)

        return await call_core(read, ResourceError)


def add_prompt(server: MCPServer, guard: Guard) -> None:

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


def add_completions(server: MCPServer, app: App, guard: Guard) -> None:
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
