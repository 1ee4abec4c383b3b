"""The read cache in front of one bucket: which requests are answered from pages (immutable files,
GET and HEAD only), which are forwarded to the store (everything that says what is current), and
the byte ranges of both."""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import threading
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit


from ...settings.variables import ENV_AWS_ACCESS_KEY_ID, ENV_AWS_SECRET_ACCESS_KEY
from ...vocabulary import LOOPBACK
from .endpoint import Endpoint, WouldWait, s3_error
from .pages import PAGE_BYTES, ObjectMeta, PageStore, page_length
from .upstream import Upstream

log = logging.getLogger(__name__)

# Files lance writes once under a fresh random name: their bytes never change.
_CREDENTIAL = re.compile(r"Credential=([^/,\s]*)/")
_IMMUTABLE = re.compile(r"\.lance/(data|_indices|_deletions)/")
_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)$")
_CONTENT_RANGE = re.compile(r"bytes ([0-9]+)-([0-9]+)/([0-9]+)$")
_PASSED_HEADERS = (
    "content-type",
    "content-length",
    "content-range",
    "etag",
    "last-modified",
    "x-amz-request-id",
    "x-amz-version-id",
)


class ReadCache:
    """The local endpoint in front of one bucket; started once per process and cache folder."""

    _running: dict[tuple[Upstream, Path], ReadCache] = {}
    _starting = threading.Lock()

    def __init__(self, upstream: Upstream, pages: PageStore):
        import urllib3

        self.upstream, self.pages = upstream, pages
        self.key = secrets.token_hex(16)  # what a caller must sign with: nobody else on this machine has it
        # LanceDB reads with many requests at once: they wait for a connection rather than open extra ones
        self.http = urllib3.PoolManager(
            maxsize=32,
            block=True,
            timeout=urllib3.Timeout(connect=10, read=120),
            retries=urllib3.Retry(total=2, redirect=0, raise_on_status=False),
        )
        self._local = threading.local()
        self._endpoint = Endpoint(self.answer_now, self.answer)

    @classmethod
    def for_store(cls, uri: str, options: dict[str, str], folder: Path, max_bytes: int) -> ReadCache | None:
        """The running cache for this store (started on first use), or None when it cannot front it."""
        upstream = Upstream.of(uri, options)
        if upstream is None:
            log.info(
                "read cache: off for %s (it serves s3:// stores whose keys are in the options or the "
                "%s / %s variables)",
                uri,
                ENV_AWS_ACCESS_KEY_ID,
                ENV_AWS_SECRET_ACCESS_KEY,
            )
            return None
        with cls._starting:
            running = cls._running.get((upstream, folder))
            if running is None:
                try:
                    running = cls(upstream, PageStore(folder, max_bytes))
                except OSError as exc:
                    log.warning("read cache: off, it cannot listen on %s (%s); searches read the store", LOOPBACK, exc)
                    return None
                cls._running[(upstream, folder)] = running
            return running

    @property
    def endpoint(self) -> str:
        host, port = self._endpoint.address
        return f"http://{host}:{port}"

    def lancedb_options(self, options: dict[str, str]) -> dict[str, str]:
        """The store's options, pointed at this endpoint (the real keys stay here)."""
        kept = {
            key: value
            for key, value in options.items()
            if not re.search(r"endpoint|access_key|secret|token|virtual_hosted|allow_http|region", key, re.I)
        }
        return {
            **kept,
            "aws_endpoint": self.endpoint,
            "allow_http": "true",
            "aws_region": self.upstream.region,
            "aws_access_key_id": self.key,
            "aws_secret_access_key": "unused",
            "aws_virtual_hosted_style_request": "false",
        }

    # ---- answering ------------------------------------------------------------------------
    def answer(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one request from LanceDB."""
        credential = _CREDENTIAL.search(headers.get("authorization", ""))
        # As bytes: compare_digest refuses str with non-ASCII characters (a hostile header would cost a 500).
        if credential is None or not hmac.compare_digest(credential[1].encode("latin-1"), self.key.encode()):
            return s3_error(403, "AccessDenied", "this endpoint serves mcp-kb's own reader only")
        if method not in ("GET", "HEAD"):
            return s3_error(405, "MethodNotAllowed", "the read cache only reads")
        parts = urlsplit(target)
        bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
        if bucket != self.upstream.bucket:
            return s3_error(403, "AccessDenied", "the read cache serves one bucket")
        query = parse_qsl(parts.query, keep_blank_values=True)
        passed = {name: value for name, value in headers.items() if name == "range" or name.startswith("if-")}
        if _IMMUTABLE.search(key) and not query and passed.keys() <= {"range"}:
            return self._cached(method, key, headers.get("range"))
        return self._forward(method, key, query, passed)  # conditions are the store's to judge

    def answer_now(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """The answer when the store is not needed (a hit, a refusal); raises WouldWait otherwise."""
        self._local.hits_only = True
        try:
            return self.answer(method, target, headers)
        finally:
            self._local.hits_only = False

    def _forward(
        self, method: str, key: str, query: list[tuple[str, str]], extra: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        if getattr(self._local, "hits_only", False):
            raise WouldWait
        url, host, canonical_query = self.upstream.url(key, query)
        try:
            response = self.http.request(
                method,
                url,
                headers={**self.upstream.signed_headers(method, url, host, canonical_query), **extra},
                preload_content=True,
            )
        except Exception as exc:  # the store is unreachable: LanceDB retries and reports it
            log.warning("read cache: the store did not answer (%s)", type(exc).__name__)
            return s3_error(503, "SlowDown", "the object store did not answer")
        kept = {name: response.headers[name] for name in _PASSED_HEADERS if name in response.headers}
        if method != "HEAD":  # a HEAD's length is the object's (its body is empty): LanceDB sizes reads by it
            kept["content-length"] = str(len(response.data))
        return response.status, kept, b"" if method == "HEAD" else response.data

    def _cached(self, method: str, key: str, range_header: str | None) -> tuple[int, dict[str, str], bytes]:
        meta = self.pages.meta(self.upstream.bucket, key)
        if meta is None and method == "HEAD":
            return self._forward("HEAD", key, [], {})
        if meta is None:  # first sight of this file: its first pages tell its size and version
            meta = self._first_pages(key, range_header)
            if meta is None:
                return self._forward(method, key, [], {"range": range_header} if range_header else {})
        start, end = _wanted(range_header, meta.size)
        if start is None:
            return s3_error(416, "InvalidRange", "the requested range is not satisfiable")
        headers = {
            "etag": meta.etag,
            "last-modified": meta.last_modified,
            "content-type": "application/octet-stream",
        }
        if method == "HEAD":
            return 200, {**headers, "content-length": str(meta.size)}, b""
        body = self._bytes(key, meta, start, end)
        if body is None:  # the store no longer holds these bytes under this version: let it answer
            return self._forward("GET", key, [], {"range": range_header} if range_header else {})
        headers["content-length"] = str(len(body))
        if range_header is None:
            return 200, headers, body
        return 206, {**headers, "content-range": f"bytes {start}-{end}/{meta.size}"}, body

    def _first_pages(self, key: str, range_header: str | None) -> ObjectMeta | None:
        """Fetch the pages a first request needs, keep them, and return the object's record."""
        match = _RANGE.match(range_header.strip()) if range_header else None
        if range_header and not (match and match[1]):  # a suffix range needs the size first: the store answers it
            return None
        first = int(match[1]) // PAGE_BYTES if match else 0
        last = int(match[2]) // PAGE_BYTES if match and match[2] else None
        fetched = self._fetch_pages(key, None, first, last)
        return fetched[0] if fetched else None

    def _bytes(self, key: str, meta: ObjectMeta, start: int, end: int) -> bytes | None:
        """Bytes start..end (inclusive) from pages, fetching the missing ones in one ranged GET."""
        if end < start:
            return b""
        first, last = start // PAGE_BYTES, end // PAGE_BYTES
        bucket = self.upstream.bucket
        pages = {n: self.pages.page(bucket, key, meta, n) for n in range(first, last + 1)}
        missing = [n for n, body in pages.items() if body is None]
        if missing:
            fetched = self._fetch_pages(key, meta, missing[0], missing[-1])
            if fetched is None:
                return None
            pages.update(fetched[1])
        data = b"".join(pages[n] for n in range(first, last + 1))  # type: ignore[misc]
        offset = start - first * PAGE_BYTES
        return data[offset : offset + end - start + 1]

    def _fetch_pages(
        self, key: str, meta: ObjectMeta | None, first: int, last: int | None
    ) -> tuple[ObjectMeta, dict[int, bytes]] | None:
        """Pages first..last (to the end when None) from the store, kept; None when the store's answer
        is not those bytes of this version (an error, another ETag, a short body)."""
        low = first * PAGE_BYTES
        wanted = f"bytes={low}-" + ("" if last is None else str((last + 1) * PAGE_BYTES - 1))
        status, headers, body = self._forward("GET", key, [], {"range": wanted})
        if status == 200:  # a store that ignores ranges sends the whole object
            size, body = len(body), body[low:]
        elif (
            status == 206 and (total := _CONTENT_RANGE.match(headers.get("content-range", ""))) and int(total[1]) == low
        ):
            size = int(total[3])
        else:
            return None
        found = ObjectMeta(size, headers.get("etag", ""), headers.get("last-modified", ""))
        if not found.etag or (meta is not None and (meta.etag, meta.size) != (found.etag, size)):
            return None
        last = (size - 1) // PAGE_BYTES if last is None else min(last, (size - 1) // PAGE_BYTES)
        pages = {n: body[(n - first) * PAGE_BYTES : (n - first + 1) * PAGE_BYTES] for n in range(first, last + 1)}
        if any(len(page) != page_length(found, n) for n, page in pages.items()):
            return None
        self.pages.put(self.upstream.bucket, key, found, pages)
        return found, pages


def _wanted(range_header: str | None, size: int) -> tuple[int | None, int]:
    """First and last byte of a request: `a-b`, `a-` (to the end) or `-n` (the last n); None: unsatisfiable."""
    if range_header is None:
        return 0, size - 1
    match = _RANGE.match(range_header.strip())
    if match and match[1] == "" and match[2]:
        return (max(0, size - int(match[2])), size - 1) if int(match[2]) > 0 and size else (None, 0)
    if not match or match[1] == "" or int(match[1]) >= size or (match[2] and int(match[2]) < int(match[1])):
        return None, 0
    return int(match[1]), min(size - 1, int(match[2])) if match[2] else size - 1
