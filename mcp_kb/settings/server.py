"""`[server]`: how `mcp-kb serve` listens, and who may use which KB (tokens, OAuth, the one matching rule)."""

from __future__ import annotations

import fnmatch
import hashlib
import re

from pydantic import Field, model_validator

from ..errors import ConfigError
from ..vocabulary import LOOPBACK
from .variables import ENV_TOKEN, environment, from_environment
from .values import KB_NAME_PATTERN, PathText, Strict, Transport


def granted(patterns: list[str], names: list[str]) -> list[str]:
    """The KB names a grant's patterns (names or globs such as "hr-*") cover: the one matching rule."""
    return [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class TokenGrant(Strict):
    """One `[[server.tokens]]` entry: a bearer token for the HTTP transports and the KBs it may use."""

    name: str = Field(pattern=KB_NAME_PATTERN.pattern)  # who the audit trail names
    secret_env: str | None = None  # the environment variable holding the token
    secret_sha256: str | None = None  # or the token's SHA-256 in hex, so kb.toml holds no secret
    kbs: list[str] = Field(min_length=1)  # names or globs
    sync: bool = False  # may call the sync tool (on these KBs)
    requests_per_minute: int = Field(0, ge=0)  # 0: no limit

    @model_validator(mode="after")
    def _one_secret(self) -> TokenGrant:
        if (self.secret_env is None) == (self.secret_sha256 is None):
            raise ValueError("give the token's secret one way: secret_env (an environment variable holding it) "
                             "or secret_sha256 (its SHA-256 in hex, e.g. from `printf %s TOKEN | sha256sum`)")
        if self.secret_sha256 is not None and not _SHA256_HEX.match(self.secret_sha256):
            raise ValueError("secret_sha256 must be 64 lowercase hex digits (`printf %s TOKEN | sha256sum`)")
        return self

    def secret_digest(self) -> str:
        """The token's SHA-256 (hex); the variable is read now, and only its name appears in errors."""
        if self.secret_sha256 is not None:
            return self.secret_sha256
        secret = environment(self.secret_env or "")
        if secret is None:
            raise ConfigError(f"[[server.tokens]] {self.name}: the environment variable {self.secret_env} "
                              f"(secret_env) is not set")
        return hashlib.sha256(secret.encode()).hexdigest()


class GroupGrant(Strict):
    """One `[[server.oauth.groups]]` entry: members of an identity provider's group and the KBs they may use."""

    group: str
    kbs: list[str] = Field(min_length=1)
    sync: bool = False


class OAuthConfig(Strict):
    """`[server.oauth]`: accept JWT access tokens an OAuth 2.1 authorization server issues for this server."""

    issuer: str = Field(pattern=r"^https?://")  # the authorization server (the tokens' `iss`)
    audience: str = Field(pattern=r"^https?://")  # this server's MCP URL as clients reach it (the tokens' `aud`)
    jwks_url: str | None = Field(None, pattern=r"^https?://")  # default: from the issuer's metadata
    groups_claim: str = "groups"  # a claim listing the user's groups, mapped by [[server.oauth.groups]]
    groups: list[GroupGrant] = Field(default_factory=list)
    leeway: float = Field(30, ge=0, le=300)  # seconds of clock skew allowed on exp / nbf
    keys_max_age: float = Field(3600, ge=10, le=86_400)  # seconds the issuer's keys are used without a refetch
    requests_per_minute: int = Field(0, ge=0)  # per user; 0: no limit


class ServerConfig(Strict):
    """Defaults for `mcp-kb serve`."""

    transport: Transport = "stdio"
    host: str = LOOPBACK
    port: int = Field(8765, ge=1, le=65535)
    read_only: bool = False  # hides the sync tool
    token: str | None = Field(None, json_schema_extra=from_environment(ENV_TOKEN))  # bearer token for HTTP transports
    allowed_hosts: list[str] = Field(default_factory=list)  # Host names clients may use, besides loopback
    # HTTP: connections open at once (fewer when the file-descriptor limit is low), and the seconds a
    # connection has to send each request's head (a slow or silent one is closed)
    max_connections: int = Field(1000, ge=8, le=100_000)
    header_timeout: float = Field(10.0, gt=0, le=300)
    tokens: list[TokenGrant] = Field(default_factory=list)  # scoped tokens: who may use which KBs
    oauth: OAuthConfig | None = None
    # HTTP: one JSON line per request that touched a KB (who, KB, what, result, latency); queries only if asked
    audit_log: PathText | None = None
    audit_max_mb: float = Field(10, gt=0)  # then the log is rotated
    audit_queries: bool = False  # queries can hold personal data
    audit_required: bool = False  # refuse a request the trail cannot record (default: go on, loudly)
    stateless: bool = False  # streamable HTTP without sessions, for replicas behind a load balancer

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
