"""Who may use which knowledge base: grants, and the bearer tokens that carry them over HTTP.

A caller is admitted by a scoped `[[server.tokens]]` secret, the one `[server] token` (everything), or
an OAuth 2.1 access token (a JWT the configured issuer signed for this server, checked against the
issuer's published keys). Over stdio the local user owns the process and is granted everything.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

import anyio

from .settings import Config, OAuthConfig, TokenGrant, granted, megabytes
from .lru import BoundedLRU
from .wire import aread_within, parse_json

__all__ = [
    "Gatekeeper",
    "Grant",
    "Identity",
    "RateLimits",
    "Refused",
]  # what the core's API (mcp_kb.api) offers from this module

log = logging.getLogger(__name__)

# Signatures made with a private key only: an HMAC "signature" could be made by anyone holding a
# published key, and `none` is no signature at all.
ASYMMETRIC_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
_KEYS_REFETCH_GAP = 5.0  # seconds between fetches of the issuer's keys (an unknown key id asks again)
_KEYS_MAX_BYTES = megabytes(1)
_KEYS_DEADLINE = 10.0  # seconds for a whole fetch (discovery and JWKS), however the issuer drips its answer
_KEYS_RETRY_AFTER = 30  # seconds a client is told to wait when no key can be had
_RATE_CALLERS_KEPT = 10_000  # rate-limit buckets remembered (the least recently seen are forgotten)
_ADMITTED_KEPT = 4096  # access tokens remembered as checked, until they expire


IdentityKind = Literal["owner", "token", "oauth", "nobody"]
IDENTITY_KINDS: dict[str, IdentityKind] = {kind: kind for kind in get_args(IdentityKind)}


@dataclass(frozen=True)
class Identity:
    """Who a caller is. The kind (and an OAuth subject's issuer) keeps namespaces apart: a JWT whose `sub`
    is "owner" or the name of a scoped token is neither, in the audit trail, the rate limits or sessions."""

    kind: IdentityKind
    name: str  # a scoped token's name, an OAuth subject; "owner" / "nobody" for those kinds
    issuer: str = ""  # an OAuth subject's issuer

    @property
    def label(self) -> str:
        """How a person reads it (a page's "signed in as", a refusal)."""
        if self.kind == "token":
            return f"{self.name} (token)"
        if self.kind == "oauth":
            return f"{self.name} (OAuth {self.issuer})"
        return self.name

    @property
    def key(self) -> str:
        """One string per identity, never shared by two (the SDK binds a session to it)."""
        return self.kind if self.kind in ("owner", "nobody") else f"{self.kind}:{self.issuer}:{self.name}"


OWNER = Identity("owner", "owner")  # the one `[server] token`, a stdio user, `mcp-kb ui`
NOBODY = Identity("nobody", "nobody")


@dataclass(frozen=True)
class Grant:
    """What one caller may do: search (and read the resources of) some KBs, sync some of them."""

    who: Identity
    search: frozenset[str]
    sync: frozenset[str] = frozenset()
    requests_per_minute: int = 0  # 0: no limit

    def sees(self, kb: str) -> bool:
        return kb in self.search

    def may_sync(self, kb: str) -> bool:
        return kb in self.sync


def everything(config: Config, who: Identity = OWNER) -> Grant:
    """The grant of the process owner: every KB, sync included."""
    names = frozenset(kb.name for kb in config.kb)
    return Grant(who, names, names)


class Refused(Exception):
    """A request the HTTP edge turns away: `status` 401 (no or bad token), 403 (a valid token without any
    KB), 429 (over its rate limit) or 503 (the issuer's keys cannot be had), with the seconds to wait
    before asking again where that is known; the message never holds the token."""

    def __init__(self, status: int, message: str, error: str = "invalid_token", retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.error = error
        self.retry_after = retry_after


class Gatekeeper:
    """Turns a bearer token into the caller's Grant, or refuses it."""

    def __init__(self, config: Config):
        self.names = [kb.name for kb in config.kb]
        self.secrets: list[tuple[bytes, Grant]] = (
            [(_digest(config.server.token), everything(config))] if config.server.token else []
        )
        self.secrets += [
            (bytes.fromhex(entry.secret_digest()), self._token_grant(entry)) for entry in config.server.tokens
        ]
        self.oauth = IssuerTokens(config.server.oauth, self.names) if config.server.oauth else None

    def _token_grant(self, entry: TokenGrant) -> Grant:
        search = frozenset(granted(entry.kbs, self.names))
        return Grant(
            Identity("token", entry.name), search, search if entry.sync else frozenset(), entry.requests_per_minute
        )

    async def admit(self, token: str) -> Grant:
        digest = _digest(token)
        found = None
        for secret, grant in self.secrets:  # every entry is compared: the time taken says nothing
            if hmac.compare_digest(secret, digest):
                found = grant
        if found is not None:
            return found
        if self.oauth is not None and token.count(".") == 2:
            return await self.oauth.grant(token, digest)
        raise Refused(401, "unknown token")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class IssuerTokens:
    """OAuth access tokens: JWTs signed by the configured issuer for this server (`aud`), in date. A
    client sends its token with every request: a token that passed is remembered until it expires, so
    its signature is checked once."""

    def __init__(self, settings: OAuthConfig, names: list[str]):
        self.settings = settings
        self.names = names
        self.keys = IssuerKeys(settings)
        self.admitted: BoundedLRU[bytes, tuple[Grant, float]] = BoundedLRU(_ADMITTED_KEPT)  # digest -> (grant, exp)

    async def grant(self, token: str, digest: bytes) -> Grant:
        known = self.admitted.get(digest)
        if known is not None and time.time() < known[1] + self.settings.leeway:
            return known[0]
        grant, expires = await self._check(token)
        self.admitted.put(digest, (grant, expires))
        return grant

    async def _check(self, token: str) -> tuple[Grant, float]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Refused(401, "malformed access token") from None
        if header.get("alg") not in ASYMMETRIC_ALGORITHMS:
            raise Refused(
                401, f"access tokens must be signed with the issuer's private key ({', '.join(ASYMMETRIC_ALGORITHMS)})"
            )
        key = await self.keys.key(header.get("kid"))
        audiences = {self.settings.audience, self.settings.audience.rstrip("/")}
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=ASYMMETRIC_ALGORITHMS,
                audience=sorted(audiences),
                issuer=self.settings.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise Refused(401, f"access token refused: {exc}") from None
        grant = self.claims_grant(claims)
        if not grant.search:
            raise Refused(
                403,
                "this access token grants no knowledge base here (scopes kb:NAME:search or a "
                "group listed in [[server.oauth.groups]])",
                error="insufficient_scope",
            )
        return grant, float(claims["exp"])

    def claims_grant(self, claims: Mapping[str, object]) -> Grant:
        """The KBs a token's scopes (`kb:NAME:search`, `kb:NAME:sync`, NAME may be a glob) and groups grant."""
        search: set[str] = set()
        sync: set[str] = set()
        for scope in _words(claims.get("scope")) + _words(claims.get("scp")):
            kind, _, rest = scope.partition(":")
            pattern, _, right = rest.rpartition(":")
            if kind == "kb" and right in ("search", "sync"):
                names = granted([pattern], self.names)
                search.update(names)  # syncing a KB includes seeing it
                if right == "sync":
                    sync.update(names)
        groups = set(_words(claims.get(self.settings.groups_claim)))
        for entry in self.settings.groups:
            if entry.group in groups:
                names = granted(entry.kbs, self.names)
                search.update(names)
                if entry.sync:
                    sync.update(names)
        who = Identity("oauth", str(claims["sub"]), self.settings.issuer)
        return Grant(who, frozenset(search), frozenset(sync), self.settings.requests_per_minute)


def _words(value: Any) -> list[str]:
    """A claim that lists names: a space-separated string (`scope`) or a JSON array (`scp`, `groups`)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


class IssuerKeys:
    """The issuer's signing keys (its JWKS): fetched when first needed and used for `keys_max_age`;
    a token naming an unknown key id fetches them again, at most once per `_KEYS_REFETCH_GAP` after the
    last fetch ended (forged key ids cannot make this server hammer the issuer, and requests waiting on a
    slow fetch share it instead of each starting one). A fetch has one deadline as a whole. When the
    issuer cannot be reached or answers garbage, the keys held keep working until they are too old; with
    none, tokens are refused (503), never accepted, never a server error."""

    def __init__(self, settings: OAuthConfig):
        self.settings = settings
        self.by_id: dict[str | None, Any] = {}
        self.fetched_at = float("-inf")
        self.tried_at = float("-inf")
        self.refetch_gap = _KEYS_REFETCH_GAP
        self.deadline = _KEYS_DEADLINE
        self.lock = anyio.Lock()
        self.tls: Any = None  # made once: building a TLS context blocks the event loop for tens of ms

    async def key(self, kid: str | None) -> Any:
        if self._stale() or kid not in self.by_id:
            async with self.lock:  # one fetch in flight; those waiting on it then find its keys (or its failure)
                if (self._stale() or kid not in self.by_id) and time.monotonic() - self.tried_at >= self.refetch_gap:
                    await self._refresh()
        if self._stale():
            raise Refused(
                503,
                "the issuer's signing keys cannot be fetched; try again later",
                error="temporarily_unavailable",
                retry_after=_KEYS_RETRY_AFTER,
            )
        if kid not in self.by_id:
            raise Refused(401, "access token signed with a key the issuer does not publish")
        return self.by_id[kid]

    def _stale(self) -> bool:
        return time.monotonic() - self.fetched_at > self.settings.keys_max_age

    async def _refresh(self) -> None:
        try:
            with anyio.fail_after(self.deadline):
                jwks = await self._fetch()
            keys = _signing_keys(jwks)
        except (OSError, ValueError) as exc:  # timeouts and httpx errors are OSErrors; garbage ValueErrors
            log.warning(
                "cannot fetch the OAuth issuer's signing keys (%s); %s",
                _reason(exc),
                "refusing access tokens" if self._stale() else "using the keys fetched before",
            )
        else:
            self.by_id, self.fetched_at = keys, time.monotonic()
        finally:
            self.tried_at = time.monotonic()  # when it ended: who waited on it does not fetch again at once

    async def _fetch(self) -> dict[str, object]:
        import httpx

        self.tls = self.tls or httpx.create_ssl_context()
        async with httpx.AsyncClient(timeout=_KEYS_DEADLINE, follow_redirects=True, verify=self.tls) as http:
            url = self.settings.jwks_url or await self._discover(http)
            return await _json(http, url)

    async def _discover(self, http: Any) -> str:
        """The jwks_uri from the issuer's metadata (RFC 8414, then OpenID Connect discovery)."""
        issuer = self.settings.issuer.rstrip("/")
        for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            try:
                uri = (await _json(http, issuer + path)).get("jwks_uri")
            except (OSError, ValueError):
                continue
            if isinstance(uri, str) and uri.startswith(("https://", "http://")):
                return uri
        raise ValueError(f"{issuer} publishes no jwks_uri in its metadata: set [server.oauth] jwks_url")


async def _json(http: Any, url: str) -> dict[str, object]:
    import httpx

    try:
        async with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
            response.raise_for_status()
            body = await aread_within(response.aiter_bytes(), _KEYS_MAX_BYTES, url)
    except httpx.HTTPError as exc:
        raise OSError(f"{url}: {exc}") from None
    data = parse_json(body, url)
    if not isinstance(data, dict):
        raise ValueError(f"{url} sent no JSON object")
    return data


def _signing_keys(jwks: Mapping[str, object]) -> dict[str | None, Any]:
    """The public signing keys of a JWKS by key id (a lone key also under None, for tokens naming none)."""
    import jwt

    keys = {}
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the issuer's JWKS holds no list of keys")
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or entry.get("kty") == "oct"
            or entry.get("use", "sig") != "sig"
            or not isinstance(entry.get("kid"), (str, type(None)))
        ):
            continue  # a shared secret is never a published signing key; a key id is text
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue  # a key type this library cannot use, or a key that is not one: others may do
        if key.algorithm_name in ASYMMETRIC_ALGORITHMS:
            keys[entry.get("kid")] = key
    if not keys:
        raise ValueError("the issuer's JWKS holds no usable public signing key")
    if len(keys) == 1:
        keys[None] = next(iter(keys.values()))
    return keys


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


class RateLimits:
    """Per caller, at most `requests_per_minute` (a bucket that refills evenly, holding a minute's worth)."""

    def __init__(self, kept: int = _RATE_CALLERS_KEPT, clock: Callable[[], float] = time.monotonic):
        self.buckets: BoundedLRU[Identity, tuple[float, float]] = BoundedLRU(kept)  # who -> (tokens, when)
        self.clock = clock  # seconds, only ever compared with itself

    def wait(self, grant: Grant) -> float:
        """0 when the request may go ahead (and is counted), else the seconds until it may."""
        limit = grant.requests_per_minute
        if not limit:
            return 0.0
        now = self.clock()
        tokens, then = self.buckets.get(grant.who) or (float(limit), now)
        tokens = min(float(limit), tokens + (now - then) * limit / 60)
        wait = 0.0 if tokens >= 1 else (1 - tokens) * 60 / limit
        self.buckets.put(grant.who, (tokens - 1 if not wait else tokens, now))
        return wait
