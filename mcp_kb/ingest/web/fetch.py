"""Fetching one URL within bounds: bytes (also after decompression), one deadline per page, redirects
kept in scope, conditional requests for cached pages, and failures as reasons that keep a page."""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.from_thread
import httpx

from ...settings import in_megabytes
from ...errors import ParseError
from ..parsers.text import decode_bytes
from .pagecache import CachedPage
from .urls import Scope

_MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_GZIP_OR_ZLIB = 47  # zlib's wbits that read a gzip or a zlib header
GONE = {404, 410}  # the only answers that remove a page; any other error keeps its indexed version


@dataclass
class Fetched:
    """The outcome of one page request."""

    url: str  # as requested
    final_url: str = ""
    status: int = 0
    body: bytes = b""
    content_type: str = ""
    charset: str = ""  # as the Content-Type header declares it
    etag: str = ""
    last_modified: str = ""
    location: str = ""  # where a redirect points
    error: str = ""  # why there is no usable answer
    transient: bool = False  # the failure may pass: keep the indexed version

    @property
    def not_modified(self) -> bool:
        return self.status == 304


class _TooLarge(Exception):
    pass


class Fetcher:
    """HTTP for one source: its headers, limits and manners; it requests nothing outside the scope.

    Requests run on an event loop of the fetcher's own (callers may be several threads), so each
    one's whole deadline (connect, headers and body) is a cancellation, which no server, however
    slowly it drips, can stretch.
    """

    def __init__(self, scope: Scope, max_bytes: int):
        self.scope = scope
        self.source = scope.source
        self.max_bytes = max_bytes
        self.requests = 0
        self.delay = self.source.delay
        self._count_lock = threading.Lock()
        self.headers = {
            "User-Agent": self.source.user_agent,
            "Accept-Encoding": "gzip, deflate",
            **self.source.request_headers(),
        }  # a bad header value is a ConfigError here, before any request
        # The transport, not a client: a client parses every redirect's Location (and fails on a bad one)
        # before the caller sees the answer; here redirects are judged by the scope, one by one.
        self.transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=self.source.concurrency))
        self._portal_context = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_context.__enter__()

    def close(self) -> None:
        try:
            self._portal.call(self.transport.aclose)
        finally:
            self._portal_context.__exit__(None, None, None)

    def get(
        self,
        url: str,
        cached: CachedPage | None = None,
        limit: int | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> Fetched:
        """GET a URL, following redirects that stay `allowed` (in scope by default)."""
        return self._portal.call(self._get, url, cached, limit or self.max_bytes, allowed or self.scope.contains)

    async def _get(self, url: str, cached: CachedPage | None, limit: int, allowed: Callable[[str], bool]) -> Fetched:
        headers = {}
        if cached and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
        current, seen = url, {url}
        for _ in range(_MAX_REDIRECTS + 1):
            result = await self._request(current, headers, limit)
            if result.status not in REDIRECTS:
                result.url, result.final_url = url, current
                return result
            if not result.location.strip():
                return Fetched(url, error=f"HTTP {result.status} without a Location to redirect to")
            target = self.scope.normalize(result.location, current)
            if target is None:
                return Fetched(
                    url, error=f"redirects to something that is not an http(s) URL: {result.location[:200]!r}"
                )
            if not allowed(target):
                return Fetched(url, error=f"redirects out of scope to {result.location[:200]}")
            if target in seen:
                return Fetched(url, error="redirect loop")
            seen.add(target)
            current = target
        return Fetched(url, error=f"more than {_MAX_REDIRECTS} redirects")

    async def _request(self, url: str, headers: dict[str, str], limit: int) -> Fetched:
        """One request, whatever happens a Fetched: this is the boundary where the network's and the
        HTTP library's failures become a page's reason."""
        if self.delay:
            await anyio.sleep(self.delay)
        with self._count_lock:
            self.requests += 1
        try:
            with anyio.fail_after(self.source.timeout):
                request = httpx.Request(
                    "GET",
                    url,
                    headers={**self.headers, **headers},
                    extensions={"timeout": httpx.Timeout(self.source.timeout).as_dict()},
                )
                response = await self.transport.handle_async_request(request)
                try:
                    return await _answer(url, response, limit)
                finally:
                    with anyio.CancelScope(shield=True):  # a cut answer's connection is closed, not reused
                        await response.aclose()
        except _TooLarge:
            return Fetched(url, error=f"too large: more than {in_megabytes(limit):g} MB (max_page_mb)")
        except (TimeoutError, httpx.TimeoutException):
            return Fetched(url, error=f"no complete answer within {self.source.timeout:g} s", transient=True)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return Fetched(url, error=f"not a URL that can be requested ({type(exc).__name__})")
        except Exception as exc:  # a broken server or body fails this page only
            return Fetched(url, error=f"request failed: {_failure(exc)}", transient=True)


async def _answer(url: str, response: httpx.Response, limit: int) -> Fetched:
    status = response.status_code
    if status in REDIRECTS:
        return Fetched(url, status=status, location=response.headers.get("location", ""))
    if status == 304:
        return Fetched(url, status=304)
    if status in GONE:
        return Fetched(url, status=status, error=f"HTTP {status}: gone")
    if status >= 400:  # 5xx, 429, and 401/403 (an expired token must not empty a wiki's KB)
        return Fetched(url, status=status, error=f"HTTP {status}", transient=True)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
        raise _TooLarge
    body = await _read_body(response, limit)
    content_type, _, parameters = response.headers.get("content-type", "").partition(";")
    charset = re.search(r"charset\s*=\s*[\"']?([^\"';\s]+)", parameters, flags=re.I)
    return Fetched(
        url,
        status=status,
        body=body,
        content_type=content_type.strip().lower(),
        charset=charset[1] if charset else "",
        etag=response.headers.get("etag", ""),
        last_modified=response.headers.get("last-modified", ""),
    )


def _failure(exc: BaseException) -> str:
    """What went wrong, without the exception's text: an HTTP library's messages can quote the request's
    headers (a token among them), and this reason is stored and shown. The system's own words for a
    network error (e.g. "Connection refused") are kept."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return f"{type(exc).__name__} ({seen.strerror})"
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


async def _read_body(response: httpx.Response, limit: int) -> bytes:
    """The body, decompressed here with a bound on the output (a gzip bomb stops at `limit`)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate", "x-gzip", ""):
        raise httpx.DecodingError(f"unsupported content-encoding {encoding!r}")
    decoder = zlib.decompressobj(_GZIP_OR_ZLIB) if encoding not in ("identity", "") else None
    body = bytearray()
    async for raw in response.aiter_raw(65536):
        pending = raw
        while pending:
            data = decoder.decompress(pending, limit + 1 - len(body)) if decoder else pending
            pending = decoder.unconsumed_tail if decoder else b""
            body += data
            if len(body) > limit:
                raise _TooLarge
    return bytes(body)


def as_utf8(body: bytes, charset: str) -> bytes:
    """A text body in UTF-8, decoded as the parsers decode (BOM, UTF-8, then the charset its server
    declared, then detection): the cached file then reads the same without the header. A body no
    encoding fits is kept as it came, for the parser to report."""
    try:
        return decode_bytes(body, charset).encode("utf-8")
    except ParseError:
        return body


def inflate(body: bytes, limit: int) -> bytes:
    """A gzip (or zlib) body decompressed to at most `limit` bytes: a bomb stops there."""
    return zlib.decompressobj(_GZIP_OR_ZLIB).decompress(body, limit)
