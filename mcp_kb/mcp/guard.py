"""Each caller's grant applied to every MCP message, and the audit trail of what callers did.

The HTTP gate admits a caller and puts its Grant on the request; this middleware (the SDK's
ServerMiddleware seam) makes it the current grant while the message is handled, narrows what lists
show (tools, the handshake's instructions, subscriptions) and answers a call on a tool outside the
grant exactly as one that does not exist. Tool and resource bodies ask `grant()` and `check()`.
A KB outside a grant is indistinguishable from a KB that is not configured. stdio has no gate: its
user owns the process and holds the owner's grant.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, Callable

from mcp_types import CallToolResult, TextContent

from ..access import Grant, everything
from ..audit import AuditTrail
from ..config import Config, unknown_kb
from ..errors import KBError
from ..vocabulary import LIST_URI, SYNC_TOOL

_current: ContextVar[Grant | None] = ContextVar("mcp_kb_grant", default=None)
_AUDITED = ("tools/call", "resources/read", "prompts/get")
ALL_KBS = "*"  # the audit trail's KB for a request about every KB the caller may see


class Guard:
    def __init__(self, config: Config, instructions: Callable[[Grant], str]):
        self.config = config
        self.owner = everything(config)
        self.instructions = instructions
        self.kb_by_tool = {kb.search_tool_name: kb.name for kb in config.kb}
        self.audit = AuditTrail(config.server)

    # ---- what tool and resource bodies ask ----

    def grant(self) -> Grant:
        """The grant of the caller whose message is being handled."""
        return _current.get() or self.owner

    def visible(self) -> list[str]:
        grant = self.grant()
        return [kb.name for kb in self.config.kb if grant.sees(kb.name)]

    def check(self, kb: str) -> str:
        """`kb` when the caller may see it; otherwise the unknown-KB error, naming only what it may see."""
        if not self.grant().sees(kb):
            raise unknown_kb(kb, self.visible())
        return kb

    def syncable(self, kb: str | None) -> list[str | None]:
        """What one sync call covers: the KB named, or every KB the caller may sync (None: all, in one go)."""
        grant = self.grant()
        if kb is not None:
            if not grant.may_sync(self.check(kb)):
                raise KBError(f"this token may search {kb} but not sync it: ask for a token with the sync right")
            return [kb]
        names = [k.name for k in self.config.kb]
        return [None] if all(grant.may_sync(name) for name in names) else [n for n in names if grant.may_sync(n)]

    # ---- the middleware ----

    async def __call__(self, ctx: Any, call_next: Callable) -> Any:
        user = getattr(ctx.request, "scope", {}).get("user") if ctx.request is not None else None
        grant = getattr(user, "grant", None) or self.owner
        token = _current.set(grant)
        started = time.perf_counter()
        try:
            result = await self._handle(ctx, call_next, grant)
        except Exception as exc:
            self._record(grant, ctx, started, error=str(getattr(exc, "message", None) or exc))
            raise
        finally:
            _current.reset(token)
        self._record(grant, ctx, started, result=result)
        return result

    async def _handle(self, ctx: Any, call_next: Callable, grant: Grant) -> Any:
        params = dict(ctx.params or {})
        if ctx.method == "tools/call" and not self._sees_tool(grant, str(params.get("name"))):
            return _unknown_tool(str(params.get("name")))
        if ctx.method == "resources/subscribe" and not self._sees_uri(grant, str(params.get("uri"))):
            return {}  # as for a URI no KB has: accepted, never updated
        if ctx.method == "subscriptions/listen":
            ctx = replace(ctx, params=self._narrowed_listen(params, grant))
        result = await call_next(ctx)
        if isinstance(result, dict) and ctx.method == "tools/list":
            result = {**result, "tools": [t for t in result.get("tools", []) if self._sees_tool(grant, t["name"])]}
        if isinstance(result, dict) and ctx.method in ("initialize", "server/discover") and "instructions" in result:
            result = {**result, "instructions": self.instructions(grant)}
        return result

    def _sees_tool(self, grant: Grant, name: str) -> bool:
        if name == SYNC_TOOL:
            return bool(grant.sync)
        return name not in self.kb_by_tool or grant.sees(self.kb_by_tool[name])

    def _sees_uri(self, grant: Grant, uri: str) -> bool:
        kb = kb_of_uri(uri)
        return kb == ALL_KBS or grant.sees(kb)

    def _narrowed_listen(self, params: dict[str, Any], grant: Grant) -> dict[str, Any]:
        wanted = params.get("notifications")
        if not isinstance(wanted, dict) or not isinstance(wanted.get("resourceSubscriptions"), list):
            return params
        uris = [uri for uri in wanted["resourceSubscriptions"] if self._sees_uri(grant, str(uri))]
        return {**params, "notifications": {**wanted, "resourceSubscriptions": uris}}

    # ---- the audit trail ----

    def _record(self, grant: Grant, ctx: Any, started: float, result: Any = None, error: str | None = None) -> None:
        if ctx.method not in _AUDITED or self.audit.file is None:
            return
        params = ctx.params or {}
        arguments = params.get("arguments") or {}
        if ctx.method == "resources/read":
            kb, action = kb_of_uri(str(params.get("uri"))), f"read {params.get('uri')}"
        elif ctx.method == "prompts/get":
            kb, action = str(arguments.get("kb") or ALL_KBS), f"prompt {params.get('name')}"
        else:
            name = str(params.get("name"))
            kb = self.kb_by_tool.get(name) or str(arguments.get("kb") or ALL_KBS)
            action = f"tool {name}"
        results = None
        if isinstance(result, dict) and result.get("isError"):
            error = " ".join(part.get("text", "") for part in result.get("content", []) if isinstance(part, dict))
        elif isinstance(result, dict):
            structured = result.get("structuredContent") or {}
            found = structured.get("results", structured.get("reports"))
            results = len(found) if isinstance(found, list) else None
        query = arguments.get("query") if isinstance(arguments.get("query"), str) else None
        self.audit.record(grant.who, kb, action, (time.perf_counter() - started) * 1000, results, error, query)


def kb_of_uri(uri: str) -> str:
    """The KB a resource URI is about (`kb://NAME/...`), ALL_KBS for the list of KBs."""
    if uri == LIST_URI:
        return ALL_KBS
    return uri.removeprefix("kb://").split("/", 1)[0]


def _unknown_tool(name: str) -> dict[str, Any]:
    """The SDK's answer to a call on a tool it does not have, word for word."""
    return CallToolResult(content=[TextContent(type="text", text=f"Unknown tool: {name}")],
                          is_error=True).model_dump(by_alias=True, mode="json", exclude_none=True)
