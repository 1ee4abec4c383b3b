"""The HTTP edge: how a request to `/mcp` or to the admin page becomes a caller's view, or is refused.

One place reads the credentials (the bearer header; for the page also the cookie its sign-in sets),
admits them through the Gatekeeper within the caller's rate limit, and words every refusal (401, 403,
429, 503) with its WWW-Authenticate and Retry-After headers. It also holds the Host/Origin rules both
apps apply. Over `/mcp` the admitted Grant rides the request (`scope["user"]`, which mcp/guard.py
turns into the caller's view); the page asks the edge for the view itself.

The SDK's bearer middleware is not used: it can answer only 401/403 with its own wording, and a caller
here may also be over its rate limit (429) or meet an issuer whose keys cannot be had (503). Its
AuthenticatedUser (sessions stay bound to it) and its protected-resource metadata routes are used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from math import ceil
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ..api import CallerView, Gatekeeper, Grant, RateLimits, Refused
from ..settings import ENV_TOKEN, Config

COOKIE = "mcp_kb_token"  # the page's sign-in keeps the token here (never read for /mcp: no CSRF there)
METADATA_PATH = "/.well-known/oauth-protected-resource"


def presented_token(headers: Headers, cookies: Mapping[str, str] | None = None) -> str:
    """The token a request carries: `Authorization: Bearer <token>` (the scheme in any case), else the
    page's cookie when `cookies` are given; "" when it carries none."""
    scheme, _, credentials = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return (cookies or {}).get(COOKIE, "")


def page_token(request: Request) -> str:
    """The token a request to the admin page carries: its bearer header, else the sign-in's cookie."""
    return presented_token(request.headers, request.cookies)


class Edge:
    """Admission for one server: `gatekeeper` None means no token is configured, and every caller
    holds the owner's view (a loopback server, `mcp-kb ui`)."""

    def __init__(self, config: Config, gatekeeper: Gatekeeper | None, security: TransportSecuritySettings):
        self.config = config
        self.gatekeeper = gatekeeper
        self.security = security
        self.limits = RateLimits()  # one per server: a caller's limit covers /mcp and the page together
        oauth = config.server.oauth
        self.oauth_urls = (oauth.audience, oauth.issuer) if oauth and gatekeeper else None
        self.metadata_url = _metadata_url(oauth.audience) if self.oauth_urls and oauth else None
        # the origin clients are told this server has (the OAuth audience, its URL behind a proxy)
        self.public_origin = _origin(oauth.audience) if oauth else ""

    @property
    def guarded(self) -> bool:
        return self.gatekeeper is not None

    async def admit(self, token: str) -> CallerView:
        """The view of the caller this token names, or Refused (401 / 403 / 503)."""
        if self.gatekeeper is None:
            return CallerView.owner(self.config)
        if not token:
            raise Refused(401, "send the header Authorization: Bearer <token>", error="")
        if not token.isascii():
            raise Refused(401, "a bearer token is ASCII")
        return CallerView(self.config, await self.gatekeeper.admit(token))

    def count(self, view: CallerView) -> None:
        """Counts one request against the caller's rate limit, or refuses it (429) saying how long to wait."""
        wait = self.limits.wait(view.grant)
        if wait:
            seconds = max(1, ceil(wait))
            raise Refused(
                429,
                f"{view.who.label} may send {view.grant.requests_per_minute} requests a minute; retry in {seconds} s",
                error="rate_limited",
                retry_after=seconds,
            )

    async def caller(self, headers: Headers, cookies: Mapping[str, str] | None = None) -> CallerView:
        """The view of the caller a request comes from, counted against its rate limit, or Refused."""
        view = await self.admit(presented_token(headers, cookies))
        self.count(view)
        return view

    def sent_from_here(self, headers: Headers, scheme: str) -> bool:
        """Whether a form was posted by a page of this server: its `Origin` is exactly the origin the request
        was sent to (scheme, the Host it names, port), or the configured public one. Not another port of
        this host: cookies ignore ports, so a page on any local port would otherwise count as this one. No
        Origin at all is a forgery (browsers send it with every form POST)."""
        origin = headers.get("origin", "")
        own = _origin(f"{scheme}://{headers.get('host', '')}")
        return bool(origin) and _origin(origin) in {own, self.public_origin} - {""}

    def refusal_headers(self, refusal: Refused) -> dict[str, str]:
        """A refusal's WWW-Authenticate (pointing at the resource metadata when OAuth is on) and Retry-After."""
        headers = {}
        if refusal.status in (401, 403, 503):
            challenge = [f'error="{refusal.error}"'] if refusal.error else []
            if self.metadata_url:
                challenge.append(f'resource_metadata="{self.metadata_url}"')
            headers["www-authenticate"] = ("Bearer " + ", ".join(challenge)).strip()
        if refusal.retry_after is not None:
            headers["retry-after"] = str(refusal.retry_after)
        return headers

    def description(self, refusal: Refused) -> str:
        """What a refusal tells the caller: why, and for a token the server does not know, which it knows."""
        if refusal.status != 401:
            return str(refusal)
        issuer = " or one from the OAuth issuer" if self.oauth_urls else ""
        return f"{refusal}; use a token the server knows ({ENV_TOKEN}, [[server.tokens]]{issuer})"


class AccessGate:
    """`/mcp` behind the edge: every request carries a bearer token the edge admits, and the caller's
    Grant then rides it. With OAuth configured, the protected-resource metadata (RFC 9728) is public
    and every 401 points at it, so MCP clients can sign their user in."""

    def __init__(self, app: Any, edge: Edge):
        self.app = app
        self.edge = edge
        self.metadata = None
        if edge.oauth_urls:
            from mcp.server.auth.routes import create_protected_resource_routes
            from starlette.routing import Router

            resource, issuer = edge.oauth_urls
            urls: Any = (resource, [issuer])  # text, as the SDK takes them at run time (see _metadata_url)
            self.metadata = Router(create_protected_resource_routes(*urls))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        if self.metadata is not None and scope["path"].startswith(METADATA_PATH):
            await self.metadata(scope, receive, send)
            return
        try:
            view = await self.edge.caller(Headers(scope=scope))
        except Refused as refusal:
            await respond_json(
                send,
                refusal.status,
                {"error": refusal.error or "invalid_request", "error_description": self.edge.description(refusal)},
                self.edge.refusal_headers(refusal),
            )
            return
        await self.app({**scope, "user": Caller(view.grant)}, receive, send)


def _origin(url: str) -> str:
    """The origin of a URL, `scheme://host:port` in one spelling (lower case, the port always written), "" if
    it has none (`null`, a bare name)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return ""
    host = parts.hostname or ""
    if not host or port is None:
        return ""
    return f"{parts.scheme.lower()}://{'[' + host + ']' if ':' in host else host}:{port}"


def _metadata_url(resource: str) -> str:
    """Where the protected-resource metadata (RFC 9728) of this server is published."""
    from mcp.server.auth.routes import build_resource_metadata_url

    # The SDK takes the URL as text at run time; its hint asks for a pydantic URL, which would rewrite it.
    url: Any = resource
    return str(build_resource_metadata_url(url))


class Caller(AuthenticatedUser):
    """The admitted caller as the SDK knows it (sessions stay bound to its identity) and with its Grant."""

    def __init__(self, grant: Grant):
        key = grant.who.key
        super().__init__(AccessToken(token="", client_id=key, scopes=sorted(grant.search), subject=key))
        self.grant = grant


async def respond_json(send: Send, status: int, body: dict[str, str], headers: dict[str, str] | None = None) -> None:
    """Answer an HTTP request with `status` and `body` as JSON (and `headers`), whole."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *((name.encode(), value.encode()) for name, value in (headers or {}).items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
