"""`[server]`: how `mcp-kb serve` listens, and who may use which KB (tokens, OAuth, the one matching rule)."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from typing import Literal

from pydantic import Field, model_validator

from ..errors import ConfigError
from ..vocabulary import LOOPBACK
from .variables import ENV_CURSOR_SECRET, ENV_TOKEN, environment, from_environment
from .values import KB_NAME_PATTERN, PathText, Strict, Transport


def granted(patterns: list[str], names: list[str]) -> list[str]:
    """The KB names a grant's patterns (names or globs such as "hr-*") cover: the one matching rule."""
    return [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class TokenGrant(Strict):
    """One `[[server.tokens]]` entry: a bearer token for the HTTP transports and the KBs it may use."""

    name: str = Field(pattern=KB_NAME_PATTERN.pattern)
    """Who the token is: the audit trail's name for its caller."""
    secret_env: str | None = None
    """The environment variable holding the token (give this or `secret_sha256`)."""
    secret_sha256: str | None = None
    """The token's SHA-256 in hex, so kb.toml holds no secret (`printf %s TOKEN | sha256sum`)."""
    kbs: list[str] = Field(min_length=1)
    """The KBs it may use: names or globs such as `"hr-*"` (one matching nothing is an error)."""
    sync: bool = False
    """Whether it may sync those KBs (the sync tool, the page's buttons)."""
    requests_per_minute: int = Field(0, ge=0)
    """Its rate limit (0: none)."""

    @model_validator(mode="after")
    def _one_secret(self) -> TokenGrant:
        if (self.secret_env is None) == (self.secret_sha256 is None):
            raise ValueError(
                "give the token's secret one way: secret_env (an environment variable holding it) "
                "or secret_sha256 (its SHA-256 in hex, e.g. from `printf %s TOKEN | sha256sum`)"
            )
        if self.secret_sha256 is not None and not _SHA256_HEX.match(self.secret_sha256):
            raise ValueError("secret_sha256 must be 64 lowercase hex digits (`printf %s TOKEN | sha256sum`)")
        return self

    def secret_digest(self) -> str:
        """The token's SHA-256 (hex); the variable is read now, and only its name appears in errors."""
        if self.secret_sha256 is not None:
            return self.secret_sha256
        secret = environment(self.secret_env or "")
        if secret is None:
            raise ConfigError(
                f"[[server.tokens]] {self.name}: the environment variable {self.secret_env} (secret_env) is not set"
            )
        return hashlib.sha256(secret.encode()).hexdigest()


class GroupGrant(Strict):
    """One `[[server.oauth.groups]]` entry: members of an identity provider's group and the KBs they may use."""

    group: str
    """The group's name as the `groups_claim` lists it."""
    kbs: list[str] = Field(min_length=1)
    """The KBs its members may use: names or globs."""
    sync: bool = False
    """Whether its members may sync those KBs."""


class OAuthConfig(Strict):
    """`[server.oauth]`: accept JWT access tokens an OAuth 2.1 authorization server issues for this server."""

    issuer: str = Field(pattern=r"^https?://")
    """The authorization server whose access tokens (JWTs) are accepted (their `iss`)."""
    audience: str = Field(pattern=r"^https?://")
    """This server's MCP URL as clients reach it (the tokens' `aud`)."""
    jwks_url: str | None = Field(None, pattern=r"^https?://")
    """Where the issuer's signing keys are (unset: from the issuer's metadata)."""
    groups_claim: str = "groups"
    """The claim listing a user's groups, mapped to KBs by `[[server.oauth.groups]]` (besides `kb:NAME:search` and
    `kb:NAME:sync` scopes)."""
    groups: list[GroupGrant] = Field(default_factory=list)
    """KBs granted to the members of the identity provider's groups."""
    leeway: float = Field(30, ge=0, le=300)
    """Seconds of clock skew allowed on `exp` and `nbf`."""
    keys_max_age: float = Field(3600, ge=10, le=86_400)
    """Seconds the issuer's keys are used without a refetch."""
    requests_per_minute: int = Field(0, ge=0)
    """A rate limit per user (0: none)."""


SearchTools = Literal["auto", "each", "across", "both"]
# With more knowledge bases than this, `search_tools = "auto"` lists only the search tool across them, not one each:
# with 4 KBs a tool chosen by its description was the right KB for 0.77 of queries, the search across for 0.99
# (benchmarks/workbench.py right-kb), and a model's choice degrades as tool lists grow.
AUTO_EACH_UP_TO = 8
PAGE_PORT = 8766  # `mcp-kb ui`'s port: one above a server's (`port` below), so both run on one machine at once


class ServerConfig(Strict):
    """Defaults for `mcp-kb serve`."""

    transport: Transport = "stdio"
    """`stdio`, `sse` or `http` (streamable HTTP)."""
    host: str = LOOPBACK
    """The address the HTTP transports listen on."""
    port: int = Field(8765, ge=1, le=65535)
    """The port the HTTP transports listen on."""
    read_only: bool = False
    """Hide the sync tool and never write: another process (`mcp-kb watch`) syncs."""
    token: str | None = Field(None, json_schema_extra=from_environment(ENV_TOKEN))
    """One bearer token for everything over HTTP."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names clients may use besides 127.0.0.1, localhost and the bound address (DNS-rebinding protection)."""
    max_connections: int = Field(1000, ge=8, le=100_000)
    """HTTP connections open at once (at most half the file-descriptor limit; at the cap the connection waiting
    longest for its request head is closed)."""
    header_timeout: float = Field(10.0, gt=0, le=300)
    """Seconds an HTTP connection has to send each request head (a slow or silent one is closed)."""
    tokens: list[TokenGrant] = Field(default_factory=list)
    """Scoped bearer tokens: who may use which KBs."""
    oauth: OAuthConfig | None = None
    """Accept OAuth 2.1 access tokens."""
    audit_log: PathText | None = None
    """One JSON line per request that touched a KB (who, KB, what, result count or error, latency)."""
    audit_max_mb: float = Field(10, gt=0)
    """MB of audit log before it is rotated."""
    audit_queries: bool = False
    """Write the query text to the audit log too (queries can hold personal data)."""
    audit_required: bool = False
    """Refuse a request the audit trail cannot record (a full disk); by default requests go on, and the failure is
    loud."""
    stateless: bool = False
    """Streamable HTTP without sessions (`serve --stateless`): replicas behind a load balancer need no sticky
    sessions."""
    workers: int = Field(1, ge=1, le=64)
    """Processes serving stateless streamable HTTP on one port (`serve --workers N`): each answers any request, so
    searches use every core. A session, an SSE stream or a sync task lives in one process: more than one worker
    needs `stateless`, and the sync tool then answers when its sync ends (no tasks)."""
    search_tools: SearchTools = "auto"
    """Which search tools a server lists: `each` (one per knowledge base), `across` (one over every knowledge base a
    caller sees), `both`, or `auto`: with several knowledge bases one across them, and one each up to
    AUTO_EACH_UP_TO of them, counted over the knowledge bases each caller sees."""
    cursor_secret: str | None = Field(None, json_schema_extra=from_environment(ENV_CURSOR_SECRET))
    """The key that signs the cursors of read_document and list_documents. Replicas behind a load balancer share
    one; by default each server process draws its own (a cursor then lasts as long as the process)."""

    @model_validator(mode="after")
    def _distinct_tokens(self) -> ServerConfig:
        names = [token.name for token in self.tokens]
        if len(set(names)) < len(names):
            raise ValueError("two [[server.tokens]] share a name: each needs its own (the audit trail names it)")
        hashes = [token.secret_sha256 for token in self.tokens if token.secret_sha256]
        variables = [token.secret_env for token in self.tokens if token.secret_env]
        if len(set(hashes)) < len(hashes) or len(set(variables)) < len(variables):
            raise ValueError("two [[server.tokens]] share a secret: a secret must name one caller")
        return self

    @property
    def guarded(self) -> bool:
        """Whether HTTP requests need a token (one for everything, scoped ones, or OAuth)."""
        return bool(self.token or self.tokens or self.oauth)
