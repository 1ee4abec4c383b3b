"""A read-through disk cache for an index on S3-compatible storage.

LanceDB keeps no local copy of what it reads from object storage (lancedb#3106): against a local
S3 server a hybrid search made ~60 ranged GETs of data and index files and took 10× a folder's
time. Lance never rewrites a data, index or deletion file (their names carry a fresh random id), so
their bytes can be kept by name forever; everything else (listings, manifests, version hints) says
what is current and always goes to the store, so a cache can never make a reader stale.

LanceDB has no hook for its object store, so the cache is a small S3 endpoint on 127.0.0.1: a
reader's connection uses it (`ReadCache.lancedb_options`), it serves the pages it holds and
forwards the rest to the real store, signed with the real credentials. It answers only GET and
HEAD, only for the configured bucket, only to a caller presenting this process's random key.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
import zlib
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import h11

from ..settings.variables import (ENV_AWS_ACCESS_KEY_ID, ENV_AWS_DEFAULT_REGION, ENV_AWS_ENDPOINT_URL,
                                    ENV_AWS_REGION, ENV_AWS_SECRET_ACCESS_KEY, ENV_AWS_SESSION_TOKEN, environment)
from ..vocabulary import LOOPBACK

log = logging.getLogger(__name__)

PAGE_BYTES = 64 * 1024  # a miss fetches whole pages: a few fetches warm a file lance reads in many small ranges
# Files lance writes once under a fresh random name: their bytes never change.
_IMMUTABLE = re.compile(r"\.lance/(data|_indices|_deletions)/")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_CREDENTIAL = re.compile(r"Credential=([^/,\s]*)/")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_PASSED_HEADERS = ("content-type", "content-length", "content-range", "etag", "last-modified", "x-amz-request-id",
                   "x-amz-version-id")
_MAX_HEAD_BYTES = 16 * 1024  # a request line and headers longer than this end the connection
_IDLE_SECONDS = 120.0  # an idle or dripping connection is closed after this long
_WARNING_INTERVAL = 60.0  # seconds between repeats of the same cache warning
_TOUCH_INTERVAL = 60.0  # seconds: how fresh a page's "last used" time is kept
_MAX_REMEMBERED = 100_000  # objects' records and pages' use times held in memory, each ~100 bytes


# ---- where the store is and who we are there ------------------------------------------------

@dataclass(frozen=True)
class Upstream:
    """The real S3 endpoint of one bucket and the credentials that sign requests to it."""

    bucket: str
    endpoint: str  # scheme://host[:port], no path
    virtual_hosted: bool  # bucket in the host name rather than the path
    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never the secrets, whatever prints this
        return f"Upstream({self.endpoint}, bucket={self.bucket!r}, region={self.region!r})"

    @classmethod
    def of(cls, uri: str, options: dict[str, str]) -> Upstream | None:
        """The upstream of an s3:// URI from LanceDB's storage options and the AWS variables, or None
        when its credentials are not static keys (instance roles, SSO: only LanceDB can use those)."""
        parts = urlsplit(uri)
        if parts.scheme not in ("s3", "s3a") or not parts.netloc:
            return None
        option = _options_reader({key.lower(): value for key, value in options.items()})
        access_key = option("aws_access_key_id", "access_key_id", env=ENV_AWS_ACCESS_KEY_ID)
        secret_key = option("aws_secret_access_key", "secret_access_key", env=ENV_AWS_SECRET_ACCESS_KEY)
        if not access_key or not secret_key:
            return None
        region = option("aws_region", "region", env=ENV_AWS_REGION) or environment(ENV_AWS_DEFAULT_REGION) or "us-east-1"
        endpoint = option("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url", env=ENV_AWS_ENDPOINT_URL)
        virtual = option("aws_virtual_hosted_style_request", "virtual_hosted_style_request") or ""
        if endpoint:
            endpoint, virtual_hosted = endpoint.rstrip("/"), virtual.lower() == "true"
        else:
            endpoint, virtual_hosted = f"https://s3.{region}.amazonaws.com", True
        return cls(parts.netloc, endpoint, virtual_hosted, region, access_key, secret_key,
                   option("aws_session_token", "session_token", "token", env=ENV_AWS_SESSION_TOKEN))

    def url(self, key: str, query: list[tuple[str, str]]) -> tuple[str, str, str]:
        """(URL, Host header, canonical query) of a request for `key` ("" for the bucket itself)."""
        scheme, host = self.endpoint.split("://", 1)
        path = "/" + quote(key, safe="/-_.~")
        if self.virtual_hosted:
            host = f"{self.bucket}.{host}"
        else:
            path = f"/{quote(self.bucket, safe='-_.~')}" + (path if key else "")
        canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query))
        return f"{scheme}://{host}{path}" + (f"?{canonical_query}" if canonical_query else ""), host, canonical_query

    def signed_headers(self, method: str, url: str, host: str, canonical_query: str,
                       now: datetime.datetime | None = None) -> dict[str, str]:
        """AWS Signature Version 4 headers for a request without a body."""
        now = now or datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": stamp}
        if self.session_token:
            headers["x-amz-security-token"] = self.session_token
        names = ";".join(sorted(headers))
        canonical = "\n".join([method, urlsplit(url).path or "/", canonical_query,
                               "".join(f"{name}:{headers[name].strip()}\n" for name in sorted(headers)),
                               names, _EMPTY_SHA256])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        key = f"AWS4{self.secret_key}".encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={names}, Signature={signature}")
        return headers


def _options_reader(options: dict[str, str]):
    def option(*names: str, env: str | None = None) -> str | None:
        for name in names:
            if options.get(name):
                return options[name]
        return environment(env) if env else None
    return option


# ---- pages on disk --------------------------------------------------------------------------

class PageStore:
    """Pages of immutable objects in a folder, bounded in size, least recently used evicted first.

    A page file is its bytes behind a CRC-32, written to a temporary name and renamed, so a reader
    (of this or another process sharing the folder) sees a whole page or none, and a damaged one is
    recognised and dropped. An object's size, ETag and date sit beside its pages in a small record.
    """

    def __init__(self, folder: Path, max_bytes: int):
        self.folder, self.max_bytes = folder, max_bytes
        self._lock = threading.Lock()
        self._used: int | None = None  # bytes in the folder, counted on first need
        self._warned: dict[str, float] = {}
        # Kept in memory too: a hit reads no record, and marks a page used once a minute, not on every read.
        self._metas: dict[str, dict[str, Any]] = {}
        self._touched: dict[str, float] = {}

    def _object_folder(self, bucket: str, key: str) -> str:
        digest = hashlib.sha256(f"{bucket}/{key}".encode()).hexdigest()
        return os.path.join(self.folder, digest[:2], digest)

    def meta(self, bucket: str, key: str) -> dict[str, Any] | None:
        known = self._metas.get(f"{bucket}/{key}")
        if known is not None:
            return known
        try:
            with open(os.path.join(self._object_folder(bucket, key), "meta.json"), "rb") as file:
                record = json.loads(file.read())
        except (OSError, ValueError):
            return None
        if not (isinstance(record, dict) and isinstance(record.get("size"), int) and record.get("etag")):
            return None
        self._remember(bucket, key, record)
        return record

    def _remember(self, bucket: str, key: str, meta: dict[str, Any]) -> None:
        if len(self._metas) > _MAX_REMEMBERED:
            self._metas.clear()
        self._metas[f"{bucket}/{key}"] = meta

    def page(self, bucket: str, key: str, meta: dict[str, Any], number: int) -> bytes | None:
        path = os.path.join(self._object_folder(bucket, key), f"{_etag_name(meta)}-{number}")
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            return None
        body = data[4:]
        intact = len(data) >= 4 and zlib.crc32(body) == int.from_bytes(data[:4], "big")
        if not intact or len(body) != _page_length(meta, number):
            self.warn("damaged", f"read cache: dropped a damaged page of {key}; reading it from the store")
            _unlink(Path(path))
            return None
        self._mark_used(path)
        return body

    def _mark_used(self, path: str) -> None:
        """Eviction goes by modification time: refresh it, at most once a minute per page."""
        now = time.monotonic()
        if now - self._touched.get(path, -_TOUCH_INTERVAL) < _TOUCH_INTERVAL:
            return
        if len(self._touched) > _MAX_REMEMBERED:
            self._touched.clear()
        self._touched[path] = now
        try:
            os.utime(path)
        except OSError:
            pass

    def put(self, bucket: str, key: str, meta: dict[str, Any], pages: dict[int, bytes]) -> None:
        """Keep these pages (and the object's record); a full or vanished disk only costs the caching."""
        folder = Path(self._object_folder(bucket, key))
        self._remember(bucket, key, meta)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomically(folder / "meta.json", json.dumps(meta).encode())
            for number, body in pages.items():
                _write_atomically(folder / f"{_etag_name(meta)}-{number}", zlib.crc32(body).to_bytes(4, "big") + body)
        except OSError as exc:
            self.warn("write", f"read cache: cannot keep pages in {self.folder} ({exc.strerror or exc}); "
                               f"reading from the store")
            return
        self._account(sum(len(body) + 4 for body in pages.values()))

    def _account(self, added: int) -> None:
        with self._lock:
            self._used = self._count() if self._used is None else self._used + added
            if self._used <= self.max_bytes:
                return
            self._used = self._count()  # other processes may share the folder: count what is really there
            if self._used > self.max_bytes:
                self._used = self._evict(int(self.max_bytes * 0.8))

    def _files(self) -> list[tuple[os.stat_result, Path]]:
        """Page files with their stat, temporary ones too (a killed process's leftovers take space as well)."""
        found = []
        for path in self.folder.glob("??/*/*"):
            if path.name != "meta.json":
                try:
                    found.append((path.stat(), path))
                except OSError:
                    pass
        return found

    def _count(self) -> int:
        return sum(stat.st_size for stat, _ in self._files())

    def _evict(self, target: int) -> int:
        files = sorted(self._files(), key=lambda item: item[0].st_mtime)
        used = sum(stat.st_size for stat, _ in files)
        emptied = set()
        for stat, path in files:
            if used <= target:
                break
            _unlink(path)
            used -= stat.st_size
            emptied.add(path.parent)
        for folder in emptied:
            _drop_if_pageless(folder)
        return used

    def warn(self, what: str, message: str) -> None:
        """Say it once a minute at most: a broken disk must not flood the log."""
        now = time.monotonic()
        if now - self._warned.get(what, -_WARNING_INTERVAL) >= _WARNING_INTERVAL:
            self._warned[what] = now
            log.warning(message)


def _etag_name(meta: dict[str, Any]) -> str:
    """Pages are named by the object's version too: bytes of another version are never taken for these."""
    return hashlib.sha256(meta["etag"].encode()).hexdigest()[:16]


def _page_length(meta: dict[str, Any], number: int) -> int:
    return max(0, min(PAGE_BYTES, meta["size"] - number * PAGE_BYTES))


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError:
        _unlink(temporary)
        raise


def _drop_if_pageless(folder: Path) -> None:
    """An object whose pages are all evicted loses its record and folder too, or records would pile up as
    compactions replace files. A page another process writes meanwhile keeps the folder (rmdir fails);
    without its record it is fetched again and the record rewritten."""
    try:
        if any(path.name != "meta.json" for path in folder.iterdir()):
            return
        _unlink(folder / "meta.json")
        folder.rmdir()
    except OSError:
        pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# ---- the endpoint -----------------------------------------------------------------------------

class ReadCache:
    """The local endpoint in front of one bucket; started once per process and cache folder."""

    _running: dict[tuple[Upstream, Path], ReadCache] = {}
    _starting = threading.Lock()

    def __init__(self, upstream: Upstream, pages: PageStore):
        import urllib3

        self.upstream, self.pages = upstream, pages
        self.key = secrets.token_hex(16)  # what a caller must sign with: nobody else on this machine has it
        # LanceDB reads with many requests at once: they wait for a connection rather than open extra ones
        self.http = urllib3.PoolManager(maxsize=32, block=True, timeout=urllib3.Timeout(connect=10, read=120),
                                        retries=urllib3.Retry(total=2, redirect=0, raise_on_status=False))
        self._local = threading.local()
        self._endpoint = _Endpoint(self.answer_now, self.answer)

    @classmethod
    def for_store(cls, uri: str, options: dict[str, str], folder: Path, max_bytes: int) -> ReadCache | None:
        """The running cache for this store (started on first use), or None when it cannot front it."""
        upstream = Upstream.of(uri, options)
        if upstream is None:
            log.info("read cache: off for %s (it serves s3:// stores whose keys are in the options or the "
                     "%s / %s variables)", uri, ENV_AWS_ACCESS_KEY_ID, ENV_AWS_SECRET_ACCESS_KEY)
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
        kept = {key: value for key, value in options.items()
                if not re.search(r"endpoint|access_key|secret|token|virtual_hosted|allow_http|region", key, re.I)}
        return {**kept, "aws_endpoint": self.endpoint, "allow_http": "true", "aws_region": self.upstream.region,
                "aws_access_key_id": self.key, "aws_secret_access_key": "unused",
                "aws_virtual_hosted_style_request": "false"}

    # ---- answering ------------------------------------------------------------------------
    def answer(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one request from LanceDB."""
        credential = _CREDENTIAL.search(headers.get("authorization", ""))
        # As bytes: compare_digest refuses str with non-ASCII characters (a hostile header would cost a 500).
        if credential is None or not hmac.compare_digest(credential[1].encode("latin-1"), self.key.encode()):
            return _error(403, "AccessDenied", "this endpoint serves mcp-kb's own reader only")
        if method not in ("GET", "HEAD"):
            return _error(405, "MethodNotAllowed", "the read cache only reads")
        parts = urlsplit(target)
        bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
        if bucket != self.upstream.bucket:
            return _error(403, "AccessDenied", "the read cache serves one bucket")
        query = parse_qsl(parts.query, keep_blank_values=True)
        passed = {name: value for name, value in headers.items() if name == "range" or name.startswith("if-")}
        if _IMMUTABLE.search(key) and not query and passed.keys() <= {"range"}:
            return self._cached(method, key, headers.get("range"))
        return self._forward(method, key, query, passed)  # conditions are the store's to judge

    def answer_now(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """The answer when the store is not needed (a hit, a refusal); raises _WouldWait otherwise."""
        self._local.hits_only = True
        try:
            return self.answer(method, target, headers)
        finally:
            self._local.hits_only = False

    def _forward(self, method: str, key: str, query: list[tuple[str, str]],
                 extra: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if getattr(self._local, "hits_only", False):
            raise _WouldWait
        url, host, canonical_query = self.upstream.url(key, query)
        try:
            response = self.http.request(method, url, headers={**self.upstream.signed_headers(
                method, url, host, canonical_query), **extra}, preload_content=True)
        except Exception as exc:  # the store is unreachable: LanceDB retries and reports it
            log.warning("read cache: the store did not answer (%s)", type(exc).__name__)
            return _error(503, "SlowDown", "the object store did not answer")
        kept = {name: response.headers[name] for name in _PASSED_HEADERS if name in response.headers}
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
        start, end = _wanted(range_header, meta["size"])
        if start is None:
            return _error(416, "InvalidRange", "the requested range is not satisfiable")
        headers = {"etag": meta["etag"], "last-modified": meta["last-modified"],
                   "content-type": "application/octet-stream"}
        if method == "HEAD":
            return 200, {**headers, "content-length": str(meta["size"])}, b""
        body = self._bytes(key, meta, start, end)
        if body is None:  # the store no longer holds these bytes under this version: let it answer
            return self._forward("GET", key, [], {"range": range_header} if range_header else {})
        headers["content-length"] = str(len(body))
        if range_header is None:
            return 200, headers, body
        return 206, {**headers, "content-range": f"bytes {start}-{end}/{meta['size']}"}, body

    def _first_pages(self, key: str, range_header: str | None) -> dict[str, Any] | None:
        """Fetch the pages a first request needs, keep them, and return the object's record."""
        match = _RANGE.match(range_header.strip()) if range_header else None
        if range_header and not (match and match[1]):  # a suffix range needs the size first: the store answers it
            return None
        first = int(match[1]) // PAGE_BYTES if match else 0
        last = int(match[2]) // PAGE_BYTES if match and match[2] else None
        fetched = self._fetch_pages(key, None, first, last)
        return fetched[0] if fetched else None

    def _bytes(self, key: str, meta: dict[str, Any], start: int, end: int) -> bytes | None:
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
        return data[offset:offset + end - start + 1]

    def _fetch_pages(self, key: str, meta: dict[str, Any] | None, first: int,
                     last: int | None) -> tuple[dict[str, Any], dict[int, bytes]] | None:
        """Pages first..last (to the end when None) from the store, kept; None when the store's answer
        is not those bytes of this version (an error, another ETag, a short body)."""
        low = first * PAGE_BYTES
        wanted = f"bytes={low}-" + ("" if last is None else str((last + 1) * PAGE_BYTES - 1))
        status, headers, body = self._forward("GET", key, [], {"range": wanted})
        if status == 200:  # a store that ignores ranges sends the whole object
            size, body = len(body), body[low:]
        elif status == 206 and (total := _CONTENT_RANGE.match(headers.get("content-range", ""))) \
                and int(total[1]) == low:
            size = int(total[3])
        else:
            return None
        found = {"size": size, "etag": headers.get("etag", ""), "last-modified": headers.get("last-modified", "")}
        if not found["etag"] or (meta is not None and (meta["etag"], meta["size"]) != (found["etag"], size)):
            return None
        last = (size - 1) // PAGE_BYTES if last is None else min(last, (size - 1) // PAGE_BYTES)
        pages = {n: body[(n - first) * PAGE_BYTES:(n - first + 1) * PAGE_BYTES] for n in range(first, last + 1)}
        if any(len(page) != _page_length(found, n) for n, page in pages.items()):
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


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message></Error>'
    return status, {"content-type": "application/xml", "content-length": str(len(body))}, body.encode()


class _WouldWait(Exception):
    """An answer needs the store: it is worked out on a worker thread instead of the loop."""


class _Endpoint:
    """The cache's HTTP side: an asyncio loop on its own thread speaks HTTP/1.1 (h11) with keep-alive;
    hits are answered on the loop, answers that wait on the store on worker threads, so a slow store
    holds up no hit. (LanceDB makes ~60 requests a hybrid search: their overhead is the cache's cost.)"""

    def __init__(self, answer_now, answer):
        self._answer_now, self._answer = answer_now, answer
        self._workers = ThreadPoolExecutor(32, thread_name_prefix="mcp-kb read cache")
        started = threading.Event()
        self._failure: OSError | None = None
        threading.Thread(target=self._run, args=(started,), name="mcp-kb read cache", daemon=True).start()
        started.wait()
        if self._failure is not None:
            raise self._failure

    def _run(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(asyncio.start_server(self._serve, LOOPBACK, 0))
            self.address = server.sockets[0].getsockname()[:2]
        except OSError as exc:  # no loopback port for us (a sandbox): the caller goes without the cache
            self._failure = exc
            return
        finally:
            started.set()
        loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
        try:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await asyncio.wait_for(reader.read(65536), _IDLE_SECONDS))
                elif isinstance(event, h11.Request):
                    if event.method in (b"GET", b"HEAD") and not await self._end_of(connection, reader):
                        return
                    if not await self._respond(connection, event, writer):
                        return
                    connection.start_next_cycle()
                else:  # the client closed, or sent what needs no answer
                    return
        except (h11.ProtocolError, asyncio.TimeoutError, OSError):
            return
        finally:
            writer.close()

    @staticmethod
    async def _end_of(connection: h11.Connection, reader: asyncio.StreamReader) -> bool:
        """Read to the end of a request (a GET has no body; one that sends one is cut off)."""
        while (event := connection.next_event()) is not h11.PAUSED:
            if isinstance(event, h11.EndOfMessage):
                return True
            if event is h11.NEED_DATA:
                connection.receive_data(await asyncio.wait_for(reader.read(65536), _IDLE_SECONDS))
            elif not isinstance(event, h11.Data) or len(event.data) > _MAX_HEAD_BYTES:
                return False
        return False

    async def _respond(self, connection: h11.Connection, request: h11.Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close (a body we do not read, an error)."""
        method, target = request.method.decode("ascii", "replace"), request.target.decode("ascii", "replace")
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers}
        reads = method in ("GET", "HEAD")
        try:
            try:  # a hit is answered here: handing it to a thread and back cost as much as the hit
                status, answer_headers, body = self._answer_now(method, target, headers)
            except _WouldWait:
                status, answer_headers, body = await asyncio.get_running_loop().run_in_executor(
                    self._workers, self._answer, method, target, headers)
        except Exception:  # a bug here must cost one request, never the reader
            log.exception("read cache: a request failed")
            status, answer_headers, body = _error(500, "InternalError", "the read cache failed")
        if not reads:
            answer_headers = {**answer_headers, "connection": "close"}  # its body was not read
        writer.write(connection.send(h11.Response(status_code=status, headers=list(answer_headers.items()))))
        if body and method != "HEAD":
            writer.write(connection.send(h11.Data(data=body)))
        writer.write(connection.send(h11.EndOfMessage()))
        await writer.drain()
        return reads and connection.our_state is h11.DONE and connection.their_state is h11.DONE
