"""Each caller's view applied to every MCP message, and the audit trail of what callers did.

The HTTP gate admits a caller and puts its Grant on the request; this middleware (the SDK's
ServerMiddleware seam) makes the caller's view (view.py) current while the message is handled.
Everything that answers (the server's tool list and calls, resources, prompts, subscriptions and
notifications) asks that view, so the SDK shapes every answer and a KB outside the grant is absent,
not hidden. stdio has no gate: its user owns the process and holds the owner's view.
"""

from __future__ import annotations

from dataclasses import dataclass
from contextvars import ContextVar
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR

from ..api import LIST_URI, AuditTrail, AuditUnavailable, CallerView, Stopwatch
from ..settings import Config

_current: ContextVar[CallerView | None] = ContextVar("mcp_kb_view", default=None)
# What the answer being given counts (hits, sync reports), told by the tool that built it (a list, so a tool run in
# a copy of the message's context still reaches the guard).
_counted: ContextVar[list[int] | None] = ContextVar("mcp_kb_counted", default=None)
_AUDITED = ("tools/call", "resources/read", "prompts/get")
ALL_KBS = "*"  # the audit trail's KB for a request about every KB the caller may see
UNKNOWN_KB = "?"  # ... for a request naming a KB that is not configured (its text is the caller's, not ours)


@dataclass(frozen=True)
class Answer:
    """What the audit trail notes of an answer: how many results it carries, or its error."""

    results: int | None = None
    error: str | None = None


def count_answer(items: int) -> None:
    """Tell the audit trail how many results (or reports) the answer being given carries."""
    counted = _counted.get()
    if counted is not None:
        counted.append(items)


def current_view() -> CallerView | None:
    """The view of the caller whose message is being handled (None outside any message)."""
    return _current.get()


class Guard:
    def __init__(self, config: Config, instructions: Callable[[CallerView], str], audit: AuditTrail):
        self.config = config
        self.owner = CallerView.owner(config)
        self.instructions = instructions
        self.kb_by_tool = {kb.search_tool_name: kb.name for kb in config.kb}
        self.kb_names = set(self.kb_by_tool.values())
        self.audit = audit

    def view(self) -> CallerView:
        """The view of the caller whose message is being handled."""
        return _current.get() or self.owner

    # ---- the middleware ----

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        user = getattr(ctx.request, "scope", {}).get("user") if ctx.request is not None else None
        grant = getattr(user, "grant", None)
        view = CallerView(self.config, grant) if grant is not None else self.owner
        answered: list[int] = []
        token, counting = _current.set(view), _counted.set(answered)
        watch = Stopwatch()
        try:
            result = await call_next(ctx)
        except Exception as exc:
            self._record(view, ctx, watch, Answer(error=str(getattr(exc, "message", None) or exc)))
            raise
        finally:
            _current.reset(token)
            _counted.reset(counting)
        if isinstance(result, dict) and ctx.method in ("initialize", "server/discover") and "instructions" in result:
            result = {**result, "instructions": self.instructions(view)}
        if isinstance(result, dict) and result.get("isError"):
            self._record(view, ctx, watch, Answer(error=result_text(result)))
        else:
            self._record(view, ctx, watch, Answer(results=answered[-1] if answered else None))
        return result

    # ---- the audit trail ----

    def _record(self, view: CallerView, ctx: Any, watch: Stopwatch, answer: Answer) -> None:
        if ctx.method not in _AUDITED or self.audit.file is None:
            return
        params = ctx.params or {}
        given = params.get("arguments")
        arguments: dict[str, object] = given if isinstance(given, dict) else {}
        if ctx.method == "resources/read":
            kb, action = kb_of_uri(str(params.get("uri"))), f"read {params.get('uri')}"
        elif ctx.method == "prompts/get":
            kb, action = str(arguments.get("kb") or ALL_KBS), f"prompt {params.get('name')}"
        else:
            name = str(params.get("name"))
            kb = self.kb_by_tool.get(name) or str(arguments.get("kb") or ALL_KBS)
            action = f"tool {name}"
        asked = arguments.get("query")
        query = asked if isinstance(asked, str) else None
        if kb != ALL_KBS and kb not in self.kb_names:
            kb = UNKNOWN_KB
        try:
            self.audit.record(view.who, kb, action, watch.milliseconds, answer.results, answer.error, query)
        except AuditUnavailable as refused:  # [server] audit_required: the answer is not given
            raise MCPError(code=INTERNAL_ERROR, message=str(refused)) from None


def result_text(result: Mapping[str, object]) -> str:
    """A tool result's text (an error's message), as its JSON form carries it."""
    content = result.get("content", [])
    parts = content if isinstance(content, (list, tuple)) else []
    return " ".join(part.get("text", "") for part in parts if isinstance(part, dict))


def kb_of_uri(uri: str) -> str:
    """The KB a resource URI is about (`kb://NAME/...`), ALL_KBS for the list of KBs."""
    if uri == LIST_URI:
        return ALL_KBS
    return uri.removeprefix("kb://").split("/", 1)[0]
