"""HTTP transport concerns: the listening socket, Host/Origin checks against DNS rebinding on every bind,
and the gate that admits bearer tokens (scoped tokens, OAuth access tokens) within rate limits."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from math import ceil
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings

from ..access import Gatekeeper, Grant, RateLimits, Refused
from ..errors import KBError

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"]
_WILDCARD_BINDS = {"0.0.0.0", "::", ""}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (0: any free port); a port in use is one clear error."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                                flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, protocol)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise KBError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port "
                      f"or stop what is using it") from exc
    sock.listen(2048)
    return sock


def server_url(host: str, port: int, path: str) -> str:
    shown = "127.0.0.1" if host in _WILDCARD_BINDS else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}{path}"


def rebinding_protection(host: str, allowed_hosts: list[str]) -> TransportSecuritySettings:
    """Requests must name this server in Host (and, from a browser, in Origin), whatever address it binds.

    Allowed: the loopback names, the bound address itself (unless it is a wildcard) and
    `[server] allowed_hosts` (the names clients use to reach a server on the network).
    """
    names = [*_LOOPBACK_NAMES, *allowed_hosts]
    if host not in _WILDCARD_BINDS and not is_loopback(host):
        names.append(f"[{host}]" if ":" in host else host)
    hosts = [pattern for name in names for pattern in (name, f"{name}:*")]
    origins = [f"{scheme}://{pattern}" for scheme in ("http", "https") for pattern in hosts]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def warn_if_exposed(host: str, guarded: bool, allowed_hosts: list[str]) -> None:
    """Serving beyond this machine without a token lets anyone on the network read the KBs: say so loudly."""
    if is_loopback(host) or guarded:
        return
    log.warning("serving on %s WITHOUT A TOKEN: anyone who can reach this address can search every knowledge "
                "base. Set MCP_KB_TOKEN (or [server] token, [[server.tokens]], [server.oauth]) so clients must send "
                "`Authorization: Bearer <token>`.",
                host)
    if host in _WILDCARD_BINDS and not allowed_hosts:
        log.warning("requests must name 127.0.0.1 or localhost in their Host header; add the names clients use "
                    "to reach this server to [server] allowed_hosts")


class AccessGate:
    """Every HTTP request must carry `Authorization: Bearer <token>` that the gatekeeper admits (the
    scheme in any case) within its caller's rate limit; the caller's Grant then rides the request
    (`scope["user"]`, which the MCP server reads). With OAuth configured, the protected-resource
    metadata (RFC 9728) is public and every 401 points at it, so MCP clients can sign their user in."""

    def __init__(self, app, gatekeeper: Gatekeeper, resource: str | None = None, issuer: str | None = None):
        self.app = app
        self.gatekeeper = gatekeeper
        self.limits = RateLimits()
        self.metadata_url = self.metadata = None
        if resource and issuer:
            from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
            from starlette.routing import Router

            # The SDK takes the URLs as text at run time; its hints ask for pydantic URLs, which would rewrite them.
            urls: Any = (resource, [issuer])
            self.metadata_url = str(build_resource_metadata_url(urls[0]))
            self.metadata = Router(create_protected_resource_routes(*urls))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        if self.metadata is not None and scope["path"].startswith(_METADATA_PATH):
            await self.metadata(scope, receive, send)
            return
        try:
            grant = await self._admit(dict(scope.get("headers") or []))
        except Refused as refusal:
            await self._refuse(send, refusal)
            return
        wait = self.limits.wait(grant)
        if wait:
            await _respond(send, 429, {"error": "rate_limited", "error_description": f"{grant.who} may send "
                                       f"{grant.requests_per_minute} requests a minute; retry in {ceil(wait)} s"},
                           [(b"retry-after", str(ceil(wait)).encode())])
            return
        await self.app({**scope, "user": Caller(grant)}, receive, send)

    async def _admit(self, headers: dict[bytes, bytes]) -> Grant:
        scheme, _, credentials = headers.get(b"authorization", b"").strip().partition(b" ")
        if scheme.lower() != b"bearer" or not credentials.strip():
            raise Refused(401, "send the header Authorization: Bearer <token>", error="")
        try:
            token = credentials.strip().decode("ascii")
        except UnicodeDecodeError:
            raise Refused(401, "a bearer token is ASCII") from None
        return await self.gatekeeper.admit(token)

    async def _refuse(self, send, refusal: Refused) -> None:
        challenge = [f'error="{refusal.error}"'] if refusal.error else []
        if self.metadata_url:
            challenge.append(f'resource_metadata="{self.metadata_url}"')
        headers = [(b"www-authenticate", ("Bearer " + ", ".join(challenge)).strip().encode())]
        if refusal.status == 503:
            headers.append((b"retry-after", b"30"))
        description = str(refusal) + ("" if refusal.status != 401 else
                                      "; use a token the server knows (MCP_KB_TOKEN, [[server.tokens]]"
                                      f"{' or one from the OAuth issuer' if self.metadata_url else ''})")
        await _respond(send, refusal.status, {"error": refusal.error or "invalid_request",
                                              "error_description": description}, headers)


_METADATA_PATH = "/.well-known/oauth-protected-resource"


class Caller(AuthenticatedUser):
    """The admitted caller as the SDK knows it (sessions stay bound to it) and with its Grant."""

    def __init__(self, grant: Grant):
        super().__init__(AccessToken(token="", client_id=grant.who, scopes=sorted(grant.search), subject=grant.who))
        self.grant = grant


async def _respond(send, status: int, body: dict, headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": payload})
