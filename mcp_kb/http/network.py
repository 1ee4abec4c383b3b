"""Where the HTTP server listens: the socket, the URL it is reached at, the Host/Origin checks against DNS
rebinding on every bind, and the warning when it serves beyond this machine without a token."""

from __future__ import annotations

import logging
import socket

from mcp.server.transport_security import TransportSecuritySettings

from ..api import LOOPBACK, KBError
from ..settings import ENV_TOKEN, is_loopback

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = [LOOPBACK, "localhost", "[::1]"]
_WILDCARD_BINDS = {"0.0.0.0", "::", ""}


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (0: any free port); a port in use is one clear error."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, protocol)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise KBError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port or stop what is using it"
        ) from exc
    sock.listen(2048)
    return sock


def server_url(host: str, port: int, path: str) -> str:
    shown = LOOPBACK if host in _WILDCARD_BINDS else (f"[{host}]" if ":" in host else host)
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
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def warn_if_exposed(host: str, guarded: bool, allowed_hosts: list[str]) -> None:
    """Serving beyond this machine without a token lets anyone on the network read the KBs: say so loudly."""
    if is_loopback(host) or guarded:
        return
    log.warning(
        "serving on %s WITHOUT A TOKEN: anyone who can reach this address can search every knowledge "
        "base. Set %s (or [server] token, [[server.tokens]], [server.oauth]) so clients must send "
        "`Authorization: Bearer <token>`.",
        host,
        ENV_TOKEN,
    )
    if host in _WILDCARD_BINDS and not allowed_hosts:
        log.warning(
            "requests must name %s or localhost in their Host header; add the names clients use "
            "to reach this server to [server] allowed_hosts",
            LOOPBACK,
        )
