"""The admin page over HTTP: the overview at `/`, everything else under `/ui/`.

Who sees what is decided as for the MCP endpoint, by the same HTTP edge (http/edge.py): the caller's
token (a bearer header, or the cookie the login form sets) becomes the caller's view, within the same
rate limit; a KB outside the grant answers like an unknown one. With no token configured (a loopback server,
`mcp-kb ui`) the caller holds the owner's view. Defences, since this is a browser's target: the Host and
Origin checks the MCP endpoint has (DNS rebinding), POSTs only from this page's exact origin (not another
port of this host) and with a CSRF value only this process can make, GETs that change nothing, templates that escape everything, and a Content-Security-Policy
that runs no inline script and loads nothing from elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from functools import partial
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlencode

import anyio.to_thread
from jinja2 import Environment, PackageLoader, select_autoescape
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecurityMiddleware
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from ..api import (
    App,
    AuditUnavailable,
    is_number,
    CallerView,
    FILTER_SYNTAX,
    KBError,
    MAX_CHUNK_INDEX,
    parse_filters,
    parse_search,
    Refused,
    Stopwatch,
    RollbackRequest,
    option_help,
    SearchRequest,
    SearchResult,
    SyncRequest,
    SyncRunner,
)
from ..present import cited_text, stale_line
from ..settings import MODES
from ..http.edge import COOKIE, Edge, page_token
from . import views

log = logging.getLogger(__name__)

_FORM_MAX_BYTES = 64 * 1024  # the page's forms hold a token, a CSRF token and two flags; more is refused (413)
_STATIC = Path(__file__).parent / "static"
_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: with it a form POST says `Origin: null`
    (b"x-frame-options", b"DENY"),
]
_NOTICES = {
    "started": "Sync started: its progress shows below.",
    "busy": "A sync of this knowledge base is already running: its progress shows below.",
    # says nothing of which KBs that sync covers: the caller may not see them
    "queued": "Another sync holds this index: this one starts when it ends, and its progress shows below then.",
}

Handler = Callable[[Request, CallerView], Awaitable[Response]]


def _notice(key: str) -> str:
    """The line a page shows after a form: one of _NOTICES, or which version a rollback made current."""
    rolled = re.fullmatch(r"rolled-back-([0-9]{1,9})", key)
    return (
        f"Rolled back: the version chosen is current again, as version {rolled[1]}."
        if rolled
        else _NOTICES.get(key, "")
    )


def is_page_path(path: str) -> bool:
    return path == "/" or path.startswith("/ui/")


class Page:
    """The page's routes for one App; `runner` None: a read-only server (no sync buttons)."""

    def __init__(self, app: App, runner: SyncRunner | None, edge: Edge):
        self.app = app
        self.runner = runner
        self.edge = edge
        self.origin_check = TransportSecurityMiddleware(edge.security)
        self.audit = app.audit
        self.secret = secrets.token_bytes(32)  # keys the forms' CSRF values (a restart asks for a reload)
        self.templates = Environment(
            loader=PackageLoader("mcp_kb.ui", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.templates.filters["when"] = views.when
        self.templates.filters["stale_line"] = stale_line  # the core's words for a stale answer, as the LLM reads them
        # The forms say what each field does as the requests do (the tools' and the CLI's words).
        self.templates.globals["search_help"] = {name: option_help(SearchRequest, name) for name in _SEARCH_FIELDS}
        self.templates.globals["sync_help"] = {
            name: option_help(SyncRequest, name) for name in SyncRequest.model_fields
        }
        self.templates.globals["filter_syntax"] = FILTER_SYNTAX
        self.templates.globals["searches_not_counted"] = views.SEARCHES_NOT_COUNTED

    def asgi(self) -> Any:
        routes = [
            Route("/", self._page(self.overview)),
            Route("/ui/login", self.login, methods=["GET", "POST"]),
            Route("/ui/logout", self.logout, methods=["POST"]),
            Route("/ui/status.json", self._page(self.status)),
            Route("/ui/kb/{name}", self._page(self.kb_page)),
            Route("/ui/kb/{name}/search", self._page(self.search)),
            Route("/ui/kb/{name}/document", self._page(self.document)),
            Route("/ui/kb/{name}/sync", self._page(self.sync, post=True), methods=["POST"]),
            Route("/ui/kb/{name}/rollback", self._page(self.rollback, post=True), methods=["POST"]),
            Mount("/ui/static", app=StaticFiles(directory=_STATIC)),
        ]
        pages = Starlette(routes=routes, exception_handlers={_Unknown: self._unknown})
        return _SecurityHeaders(RequestBodyLimitMiddleware(pages, _FORM_MAX_BYTES))

    async def _unknown(self, request: Request, exc: Exception) -> Response:
        return self._error(request, await self._view(request), 404, str(exc))

    # ---- admission ----

    def _page(self, handler: Handler, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
        """A route behind the Host/Origin checks, the caller's view and rate limit (and for a POST, the
        page's own origin and CSRF token)."""

        async def route(request: Request) -> Response:
            refused = await self.origin_check.validate_request(request)
            if refused is not None:
                return refused
            view = await self._view(request)
            if view is None:
                if request.url.path.endswith(".json") or post:
                    return JSONResponse({"error": "sign in again"}, status_code=401)
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse("/ui/login?" + urlencode({"next": target}), status_code=303)
            try:
                self.edge.count(view)
            except Refused as refusal:  # the page's script waits as long as Retry-After says
                response = (
                    JSONResponse({"error": str(refusal)}, status_code=refusal.status)
                    if request.url.path.endswith(".json")
                    else self._error(request, view, refusal.status, str(refusal))
                )
                response.headers.update(self.edge.refusal_headers(refusal))
                return response
            if post and not await self._same_origin_form(request):
                return self._error(
                    request, view, 403, "this form is accepted only from this page (reload the page and try again)"
                )
            return await handler(request, view)

        return route

    async def _view(self, request: Request) -> CallerView | None:
        """The caller's view, None when it must sign in (again)."""
        try:
            return await self.edge.admit(page_token(request))
        except Refused:
            return None

    def csrf(self, request: Request) -> str:
        """The value this server's forms carry: keyed by this process's secret (never by anything a request
        brings: a page elsewhere could plant a cookie and work it out), bound to the caller's token."""
        return hmac.new(self.secret, b"mcp-kb page form\0" + page_token(request).encode(), hashlib.sha256).hexdigest()

    def _from_here(self, request: Request) -> bool:
        return self.edge.sent_from_here(request.headers, request.url.scheme)

    async def _same_origin_form(self, request: Request) -> bool:
        if not self._from_here(request):
            return False
        form = await request.form()
        return hmac.compare_digest(str(form.get("csrf", "")), self.csrf(request))

    async def login(self, request: Request) -> Response:
        refused = await self.origin_check.validate_request(request)
        if refused is not None:
            return refused
        target = _local(request.query_params.get("next", "/"))
        if not self.edge.guarded:
            return RedirectResponse(target, status_code=303)
        error = ""
        if request.method == "POST":
            if not self._from_here(request):
                return Response("a sign-in is accepted only from this page", status_code=403)
            token = str((await request.form()).get("token", "")).strip()
            try:
                await self.edge.admit(token)
            except Refused as refusal:
                error = f"This token was refused: {refusal}."
            else:
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(
                    COOKIE, token, httponly=True, samesite="strict", path="/", secure=request.url.scheme == "https"
                )
                return response
        return self._render("login.html", request, None, status=401 if error else 200, error=error, target=target)

    async def logout(self, request: Request) -> Response:
        refused = await self.origin_check.validate_request(request)
        if refused is not None or not self._from_here(request):
            return refused or Response("a sign-out is accepted only from this page", status_code=403)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # ---- pages ----

    async def overview(self, request: Request, view: CallerView) -> Response:
        names = view.names
        kbs = await _thread(lambda: [views.kb_summary(self.app, name) for name in names])
        syncable = {name for name in names if self._may_sync(view, name)}
        return self._render("overview.html", request, view, kbs=kbs, syncable=syncable)

    async def status(self, request: Request, view: CallerView) -> Response:
        names = view.names
        return JSONResponse(
            await _thread(partial(views.live_status, self.app, names)), headers={"cache-control": "no-store"}
        )

    async def kb_page(self, request: Request, view: CallerView) -> Response:
        name = self._kb(request, view)
        wanted = request.query_params.get("filter", "")
        details = await _thread(partial(views.kb_details, self.app, name, wanted))
        return self._render(
            "kb.html",
            request,
            view,
            **details,
            wanted=wanted,
            notice=_notice(request.query_params.get("notice", "")),
            may_sync=self._may_sync(view, name),
            may_roll_back=self._may_roll_back(view),
            storage=self.app.config.storage.uri if view.who.kind == "owner" else "",
        )

    async def search(self, request: Request, view: CallerView) -> Response:
        name = self._kb(request, view)
        kb = self.app.config.get_kb(name)
        params = request.query_params
        form = {
            "q": params.get("q", ""),
            "mode": params.get("mode", kb.search.mode),
            "top_k": params.get("top_k", str(kb.search.top_k)),
            "max_tokens": params.get("max_tokens", str(kb.search.max_tokens)),
            "filters": params.get("filters", ""),
        }
        result, error = None, ""
        if form["q"].strip() or form["filters"].strip():  # filters alone: a search in mode filter needs no query
            watch = Stopwatch()
            try:
                asked = _search_request(form)
                result = await _thread(lambda: self.app.search(name, asked))
            except KBError as exc:
                error = view.explain(exc)
            try:
                self.audit.record(
                    view.who,
                    name,
                    "page search",
                    watch.milliseconds,
                    None if result is None else len(result.hits),
                    error or None,
                    form["q"],
                )
            except AuditUnavailable as refused:
                return self._error(request, view, 503, str(refused))
        return self._render(
            "search.html",
            request,
            view,
            kb=kb,
            form=form,
            modes=MODES,
            result=result,
            error=error,
            cited=cited_text(result) if result else "",
            timings=_stage_timings(result) if result else [],
            fields=sorted(kb.filter_field_types().items()),
            filter_example=views.filter_example(kb),
        )

    async def document(self, request: Request, view: CallerView) -> Response:
        name = self._kb(request, view)
        path = request.query_params.get("path", "")
        chunk = request.query_params.get("chunk", "")
        number = int(chunk) if is_number(chunk) and int(chunk) <= MAX_CHUNK_INDEX else None
        try:
            shown = await _thread(partial(views.document, self.app, name, path, number))
        except KBError as exc:
            return self._error(request, view, 404, view.explain(exc))
        return self._render("document.html", request, view, kb=self.app.config.get_kb(name), doc=shown)

    async def sync(self, request: Request, view: CallerView) -> Response:
        name = self._kb(request, view)
        if not self._may_sync(view, name):
            return self._error(
                request,
                view,
                403,
                view.sync_refusal(name)
                if self.runner
                else "this server is read-only (read_only = true): another process syncs (mcp-kb sync or watch, or "
                "a writer server)",
            )
        form = await request.form()
        full, allow = form.get("full") == "1", form.get("allow_mass_delete") == "1"
        try:
            self.audit.record(view.who, name, "page sync" + (" full" if full else ""), 0.0)
        except AuditUnavailable as refused:
            return self._error(request, view, 503, str(refused))
        target = f"/ui/kb/{quote(name)}?notice="
        if (await _thread(lambda: self.app.glance(name))).sync_running:
            return RedirectResponse(target + "busy", status_code=303)
        queued = await _thread(self.app.index_busy)  # another KB's sync: this one waits for it
        return RedirectResponse(
            target + ("queued" if queued else "started"),
            status_code=303,
            background=BackgroundTask(
                self._sync_in_background,
                SyncRequest(kb=name, full=full, allow_mass_delete=allow, wait=queued, by=view.who.label),
            ),
        )

    async def rollback(self, request: Request, view: CallerView) -> Response:
        """The owner makes an earlier version current again (confirmed on the form; refused while a sync runs)."""
        name = self._kb(request, view)
        if not self._may_roll_back(view):
            return self._error(request, view, 403, "only the owner rolls back, on a server that syncs")
        form = await request.form()
        target = str(form.get("to", ""))
        if not target or form.get("confirm") != target:
            return self._error(request, view, 400, "tick the box that confirms the rollback, then roll back again")
        try:
            self.audit.record(view.who, name, f"page rollback to {target[:20]}", 0.0)
        except AuditUnavailable as refused:
            return self._error(request, view, 503, str(refused))
        try:
            made = await _thread(lambda: self.app.rollback(RollbackRequest(kb=name, to=target, by=view.who.label)))
        except KBError as exc:
            return self._error(request, view, 409, view.explain(exc))
        return RedirectResponse(f"/ui/kb/{quote(name)}?notice=rolled-back-{made.number}#versions", status_code=303)

    async def _sync_in_background(self, request: SyncRequest) -> None:
        """The sync a page button asked for: its outcome (a failure too) shows in the KB's status."""
        assert self.runner is not None
        name = request.kb
        try:
            await self.runner.sync(request)
        except KBError as exc:
            log.warning("%s: sync from the admin page failed: %s", name, exc)
        except Exception:
            log.exception("%s: sync from the admin page failed", name)

    # ---- helpers ----

    def _may_roll_back(self, view: CallerView) -> bool:
        """Whether this caller may roll back here (the core says who may; a read-only server writes nothing)."""
        return self.runner is not None and view.may_roll_back

    def _may_sync(self, view: CallerView, name: str) -> bool:
        """Whether this caller may sync `name` here (a read-only server syncs nothing)."""
        return self.runner is not None and view.may_sync(name)

    @staticmethod
    def _kb(request: Request, view: CallerView) -> str:
        try:
            return view.check(request.path_params["name"])
        except KBError as exc:
            raise _Unknown(str(exc)) from None

    def _render(
        self, template: str, request: Request, view: CallerView | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        names = list(view.names) if view else []
        html = self.templates.get_template(template).render(
            csrf=self.csrf(request),
            kb_names=names,
            who=view.who.label if view else "",
            audit_failure=self.audit.failure,
            signed_in=view is not None and self.edge.guarded,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers={"cache-control": "no-store"})

    def _error(self, request: Request, view: CallerView | None, status: int, message: str) -> HTMLResponse:
        return self._render("error.html", request, view, status=status, message=message)


class _Unknown(KBError):
    """A KB the caller may not see: answered as a KB that is not configured."""


def page_app(app: App, runner: SyncRunner | None, edge: Edge) -> Any:
    """The admin page as an ASGI app (see the module docstring)."""
    return Page(app, runner, edge).asgi()


class _SecurityHeaders:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _local(target: str) -> str:
    """A sign-in's return address, only ever a path on this server (never `//elsewhere`)."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"


_SEARCH_FIELDS = ("query", "mode", "top_k", "max_tokens", "filters")  # what the playground asks for


def _search_request(form: dict[str, str]) -> SearchRequest:
    """The playground's fields (text) as a search request, checked as every face's are."""
    lines = tuple(line.strip() for line in form["filters"].splitlines() if line.strip())
    return parse_search(
        {
            "query": form["q"],
            "mode": form["mode"],
            "top_k": form["top_k"].strip(),
            "max_tokens": form["max_tokens"].strip(),
            "filters": parse_filters(lines),
        }
    )


def _stage_timings(result: SearchResult) -> list[tuple[str, float]]:
    return [(stage, round(ms, 1)) for stage, ms in result.timings_ms.items()]


async def _thread(work: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(work)
