"""Web sources: crawl a documentation site within its scope into a local page cache.

A crawl starts from the configured URL, the site's sitemaps and the pages the index already holds,
follows links breadth first within the scope (same host, below the start URL's folder, the
include/exclude globs, robots.txt), and stops at `max_pages` and `max_depth`. Every page is bounded
in bytes (also after decompression) and time. Pages the cache holds are asked for with their ETag /
Last-Modified, so an unchanged site answers 304 and costs no download, parse or embedding.

What the sync sees is the same as for folders: a SourceFile per page (its id the normalized URL,
its path the cached body) and a SkippedFile per page that was not read, marked `unreadable` unless
its site said it is gone (404/410): after a timeout, a 5xx, a 429 or a 401/403 the index keeps that
page's last version.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import re
import threading
import urllib.robotparser
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

import anyio
import anyio.from_thread
import httpx

from ..settings import KBConfig, WebSourceConfig, megabytes
from ..errors import ConfigError, KBError, ParseError
from ..vocabulary import sync_remedy
from .parsers import is_binary_format, is_supported
from .parsers.text import decode_bytes
from .sources import SkippedFile, SourceFile, SourceScan

_MAX_REDIRECTS = 5
_MAX_SITEMAPS = 20  # sitemap files read per source (an index may name many)
_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemap protocol's own limit per file
_ROBOTS_BYTES = 512 * 1024
_GONE = {404, 410}  # the only answers that remove a page; any other error keeps its indexed version
# Content types that say what a body is when its URL has no telling suffix.
_SUFFIX_BY_TYPE = {
    "text/html": ".html", "application/xhtml+xml": ".html", "application/pdf": ".pdf",
    "text/markdown": ".md", "text/x-markdown": ".md", "text/plain": ".txt", "application/json": ".json",
    "text/csv": ".csv",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}
_PAGE_SUFFIXES = {".html", ".htm", ".xhtml", ".php", ".asp", ".aspx", ".jsp", ""}  # served as HTML, whatever the name

_PATH_SAFE = "/%:@!$&'()*+,;=~"  # what stays as it is in a path; spaces and non-ASCII become %XX
_PERCENT_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")
_HOST = re.compile(r"^[a-z0-9._~:-]+$")  # a DNS name, IPv4 or IPv6 address: nothing an HTTP request would refuse

Progress = Callable[[int, int, str], None]
_ORIGIN = "^https?://[^/]+"  # what comes before a page's URL path


def is_url(doc_id: str) -> bool:
    """Whether a document id names a web page rather than a file."""
    return doc_id.startswith(("http://", "https://"))


# ---- URLs and scope ---------------------------------------------------------------------------

def normalize_url(url: str, keep_query: Iterable[str] = ()) -> str | None:
    """One spelling per page: lower-case scheme and host, no default port, no fragment, dot segments
    resolved, only the query parameters that name a page (sorted). None for what is not http(s)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = _ascii_host(parts.hostname or "")
    if scheme not in ("http", "https") or host is None:
        return None
    if ":" in host:
        host = f"[{host}]"
    if port and port != {"http": 80, "https": 443}[scheme]:
        host = f"{host}:{port}"
    path = _PERCENT_ESCAPE.sub(lambda m: m[0].upper(), quote(parts.path or "/", safe=_PATH_SAFE))
    resolved = posixpath.normpath(path)
    if path.endswith("/") and not resolved.endswith("/"):
        resolved += "/"
    resolved = "/" + resolved.lstrip("/")  # normpath keeps a leading "//"
    keep = set(keep_query)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if "*" in keep or k in keep]
    return urlunsplit((scheme, host, resolved, urlencode(sorted(query)), ""))


def _ascii_host(hostname: str) -> str | None:
    """A host name as requests carry it (IDNA for non-ASCII names), or None when it cannot be one."""
    try:
        host = hostname.encode("idna").decode("ascii").lower() if not hostname.isascii() else hostname.lower()
    except UnicodeError:
        return None
    return host if _HOST.match(host) else None


@dataclass(frozen=True)
class Scope:
    """Which URLs a source may request: its start URL's host and folder, its globs, robots.txt."""

    source: WebSourceConfig
    start: str
    prefix: str  # the start URL up to the last "/" of its path

    @classmethod
    def of(cls, source: WebSourceConfig) -> Scope:
        start = normalize_url(source.url, source.keep_query)
        if start is None:
            raise ConfigError(f"urls: {source.url!r} is not an http(s) URL")
        parts = urlsplit(start)
        folder = parts.path[:parts.path.rfind("/") + 1]
        return cls(source, start, urlunsplit((parts.scheme, parts.netloc, folder, "", "")))

    @property
    def origin(self) -> str:
        parts = urlsplit(self.start)
        return f"{parts.scheme}://{parts.netloc}"

    def contains(self, url: str) -> bool:
        if not url.startswith(self.prefix):
            return False
        if self.source.include and not any(fnmatch.fnmatchcase(url, g) for g in self.source.include):
            return False
        return not any(fnmatch.fnmatchcase(url, g) for g in self.source.exclude)

    def normalize(self, url: str, base: str = "") -> str | None:
        """The normalized absolute URL, or None for anything that is not one (a page's links and a
        server's Location headers are whatever their authors wrote)."""
        try:
            return normalize_url(urljoin(base, url) if base else url, self.source.keep_query)
        except ValueError:  # e.g. "http://[oops/": urljoin refuses it
            return None


# ---- the page cache ---------------------------------------------------------------------------

@dataclass
class CachedPage:
    """What the cache keeps about one requested URL: its body file and validators."""

    url: str  # as requested
    doc_id: str  # the page's id: the final URL after redirects, or its canonical link
    file: str  # body file name in the cache folder; its suffix picks the parser
    etag: str = ""
    last_modified: str = ""
    links: list[str] = field(default_factory=list)  # in-scope links found on it (for 304 answers)
    indexable: bool = True  # false for pages marked noindex (their links are still followed)


class PageCache:
    """Bodies and validators of fetched pages, in a folder per KB; a cache, so losing it costs
    one full download of each page (never a re-embedding: the content hashes decide that).

    A body's file is named by its URL and content, so the validators in pages.json always
    describe the body they name, even after a crash between writing a body and saving the list.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.pages: dict[str, CachedPage] = {}
        try:
            raw = json.loads((folder / "pages.json").read_text(encoding="utf-8"))
            self.pages = {url: CachedPage(**entry) for url, entry in raw.items()}
        except (OSError, ValueError, TypeError):
            self.pages = {}

    def get(self, url: str) -> CachedPage | None:
        page = self.pages.get(url)
        return page if page and (self.folder / page.file).is_file() else None

    def body_path(self, page: CachedPage) -> Path:
        return self.folder / page.file

    def by_doc_id(self, doc_id: str) -> CachedPage | None:
        return next((p for p in self.pages.values() if p.doc_id == doc_id and p.indexable
                     and (self.folder / p.file).is_file()), None)

    def put(self, page: CachedPage, body: bytes) -> None:
        """Keep a body; an unchanged body keeps its file (and mtime), so its hash is not recomputed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / page.file
        if not path.is_file():
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_bytes(body)
            os.replace(temporary, path)
        self.pages[page.url] = page

    def forget(self, url: str) -> None:
        self.pages.pop(url, None)

    def save(self) -> None:
        """Write the list of pages, then remove bodies no page names any more."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / "pages.json.tmp"
        temporary.write_text(json.dumps({u: asdict(p) for u, p in self.pages.items()}), encoding="utf-8")
        os.replace(temporary, self.folder / "pages.json")
        named = {page.file for page in self.pages.values()} | {"pages.json"}
        for entry in os.scandir(self.folder):
            if entry.name not in named:
                Path(entry.path).unlink(missing_ok=True)


def body_file_name(url: str, body: bytes, suffix: str) -> str:
    return f"{_digest(url.encode('utf-8'))[:24]}-{_digest(body)[:16]}{suffix}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- fetching ---------------------------------------------------------------------------------

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
        self.headers = {"User-Agent": self.source.user_agent, "Accept-Encoding": "gzip, deflate",
                        **self.source.request_headers()}  # a bad header value is a ConfigError here, before any request
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

    def get(self, url: str, cached: CachedPage | None = None, limit: int | None = None,
            allowed: Callable[[str], bool] | None = None) -> Fetched:
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
            if result.status not in (301, 302, 303, 307, 308):
                result.url, result.final_url = url, current
                return result
            if not result.location.strip():
                return Fetched(url, error=f"HTTP {result.status} without a Location to redirect to")
            target = self.scope.normalize(result.location, current)
            if target is None:
                return Fetched(url, error=f"redirects to something that is not an http(s) URL: "
                                          f"{result.location[:200]!r}")
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
                request = httpx.Request("GET", url, headers={**self.headers, **headers},
                                        extensions={"timeout": httpx.Timeout(self.source.timeout).as_dict()})
                response = await self.transport.handle_async_request(request)
                try:
                    return await _answer(url, response, limit)
                finally:
                    with anyio.CancelScope(shield=True):  # a cut answer's connection is closed, not reused
                        await response.aclose()
        except _TooLarge:
            return Fetched(url, error=f"too large: more than {limit / 1024 / 1024:g} MB (max_page_mb)")
        except (TimeoutError, httpx.TimeoutException):
            return Fetched(url, error=f"no complete answer within {self.source.timeout:g} s", transient=True)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return Fetched(url, error=f"not a URL that can be requested ({type(exc).__name__})")
        except Exception as exc:  # a broken server or body fails this page only
            return Fetched(url, error=f"request failed: {_failure(exc)}", transient=True)


async def _answer(url: str, response: httpx.Response, limit: int) -> Fetched:
    status = response.status_code
    if status in (301, 302, 303, 307, 308):
        return Fetched(url, status=status, location=response.headers.get("location", ""))
    if status == 304:
        return Fetched(url, status=304)
    if status in _GONE:
        return Fetched(url, status=status, error=f"HTTP {status}: gone")
    if status >= 400:  # 5xx, 429, and 401/403 (an expired token must not empty a wiki's KB)
        return Fetched(url, status=status, error=f"HTTP {status}", transient=True)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and "content-encoding" not in response.headers:
        raise _TooLarge
    body = await _read_body(response, limit)
    content_type, _, parameters = response.headers.get("content-type", "").partition(";")
    charset = re.search(r"charset\s*=\s*[\"']?([^\"';\s]+)", parameters, flags=re.I)
    return Fetched(url, status=status, body=body, content_type=content_type.strip().lower(),
                   charset=charset[1] if charset else "", etag=response.headers.get("etag", ""),
                   last_modified=response.headers.get("last-modified", ""))


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
    decoder = zlib.decompressobj(47) if encoding not in ("identity", "") else None  # 47: gzip or zlib header
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


# ---- robots.txt and sitemaps ------------------------------------------------------------------

def read_robots(fetcher: Fetcher) -> tuple[urllib.robotparser.RobotFileParser, list[str]]:
    """The host's robots.txt rules and sitemap URLs; a missing file allows everything.

    A robots.txt that cannot be read for a transient reason stops the crawl (RFC 9309: assume
    everything is disallowed), which the sync reports and survives by keeping its pages.
    """
    robots = urllib.robotparser.RobotFileParser()
    url = fetcher.scope.origin + "/robots.txt"
    answer = fetcher.get(url, limit=_ROBOTS_BYTES, allowed=lambda u: u.startswith(fetcher.scope.origin + "/"))
    if answer.transient:
        raise KBError(f"{url}: {answer.error}")
    lines = answer.body.decode("utf-8", "replace").splitlines() if answer.status == 200 else []
    robots.parse(lines)
    return robots, list(robots.site_maps() or [])


def sitemap_urls(fetcher: Fetcher, listed: list[str]) -> tuple[list[str], list[str]]:
    """Page URLs from the site's sitemaps (index files followed, .gz read), and problems met."""
    scope = fetcher.scope
    on_host = [u for u in (scope.normalize(x) for x in listed) if u and u.startswith(scope.origin + "/")]
    queue = on_host or [scope.origin + "/sitemap.xml"]
    pages, problems, seen = [], [], set[str]()
    while queue and len(seen) < _MAX_SITEMAPS:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        answer = fetcher.get(url, limit=_SITEMAP_BYTES, allowed=lambda u: u.startswith(scope.origin + "/"))
        if answer.status != 200:
            if on_host:  # a sitemap robots.txt names should be there; /sitemap.xml is only a guess
                problems.append(f"sitemap {url}: {answer.error or answer.status}")
            continue
        body = answer.body
        if body[:2] == b"\x1f\x8b":
            try:
                body = zlib.decompressobj(47).decompress(body, _SITEMAP_BYTES)
            except zlib.error as exc:
                problems.append(f"sitemap {url}: not valid gzip ({exc})")
                continue
        text = body.decode("utf-8", "replace")
        locations = [_xml_unescape(m) for m in re.findall(r"<loc>\s*(.*?)\s*</loc>", text, flags=re.S)]
        if re.search(r"<sitemapindex[\s>]", text):
            queue += [u for u in (scope.normalize(x) for x in locations) if u and u.startswith(scope.origin + "/")]
        else:
            pages += locations
    return pages, problems


def _xml_unescape(text: str) -> str:
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


# ---- links ------------------------------------------------------------------------------------

def page_links(body: bytes, url: str, scope: Scope) -> tuple[list[str], str | None, bool]:
    """In-scope links of an HTML page (none when its robots meta says nofollow), its canonical URL
    (if in scope), and whether its robots meta says noindex."""
    from bs4 import BeautifulSoup  # imported on first crawl, not at server start

    from .parsers.html import decode_html
    try:
        soup = BeautifulSoup(decode_html(body), "html.parser")
    except Exception:  # an undecodable or broken page has no links to follow
        return [], None, False
    base_tag = soup.find("base", href=True)
    base = urljoin(url, str(base_tag["href"])) if base_tag else url
    robots_meta = " ".join(str(m.get("content", "")) for m in soup.find_all("meta", attrs={"name": re.compile("^robots$", re.I)}))
    noindex, nofollow = "noindex" in robots_meta.lower(), "nofollow" in robots_meta.lower()
    canonical = None
    for link in soup.find_all("link", href=True):
        if "canonical" in [r.lower() for r in (link.get("rel") or [])]:
            candidate = scope.normalize(str(link["href"]), base)
            canonical = candidate if candidate and scope.contains(candidate) else None
    links: dict[str, None] = {}  # in page order, once each
    if not nofollow:
        for anchor in soup.find_all("a", href=True):
            target = scope.normalize(str(anchor["href"]), base)
            if target and scope.contains(target):
                links[target] = None
    return list(links), canonical, noindex


def suffix_for(url: str, content_type: str) -> str | None:
    """The parser suffix for a body: HTML by its content type, else the URL's suffix when a parser
    reads it (a README.md served as text/plain), else the content type's."""
    if _SUFFIX_BY_TYPE.get(content_type) == ".html":
        return ".html"
    suffix = posixpath.splitext(urlsplit(url).path)[1].lower()
    if suffix not in _PAGE_SUFFIXES and is_supported(suffix):
        return suffix
    return _SUFFIX_BY_TYPE.get(content_type)


# ---- the crawl --------------------------------------------------------------------------------

@dataclass
class CrawlStats:
    """What a crawl cost, for the sync report."""

    requests: int = 0
    downloaded: int = 0  # pages whose body came (200)
    not_modified: int = 0  # pages answered 304
    stopped_at_max_pages: int = 0  # links in scope left unfetched, when max_pages was reached


@dataclass
class Crawl:
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    stats: CrawlStats = field(default_factory=CrawlStats)


def crawl_kb(kb: KBConfig, cache_folder: Path, known: Iterable[str] = (), progress: Progress | None = None) -> Crawl:
    """Crawl every URL source of a KB; `known` are the page ids its index holds (each is asked
    for again, so a page leaves the index only when its site says it is gone)."""
    cache = PageCache(cache_folder)
    crawl = Crawl()
    try:
        for source in kb.urls:
            _crawl_source(kb, source, cache, set(known), crawl, progress)
    finally:
        cache.save()
    return crawl


def find_page(kb: KBConfig, cache_folder: Path, doc_id: str) -> SourceFile:
    """The cached page behind a URL id of the KB (the document resource); anything else is refused."""
    for source in kb.urls:
        if Scope.of(source).contains(doc_id):
            cache = PageCache(cache_folder)
            page = cache.by_doc_id(doc_id)
            if page:
                return _source_file(cache, page)
    raise KBError(f"{doc_id!r} is not a page of knowledge base {kb.name!r} (or it was not crawled on this machine "
                  f"yet: {sync_remedy(kb.name)})")


def _crawl_source(kb: KBConfig, source: WebSourceConfig, cache: PageCache, known: set[str], crawl: Crawl,
                  progress: Progress | None) -> None:
    scope = Scope.of(source)
    fetcher = Fetcher(scope, megabytes(source.max_page_mb))
    try:
        try:
            robots, listed = read_robots(fetcher)
        except KBError as exc:
            crawl.skipped.append(SkippedFile(scope.prefix, f"site unreachable ({exc}); its pages keep their "
                                             f"indexed version", unreadable=True))
            return
        crawl_delay = robots.crawl_delay(source.user_agent)
        if crawl_delay:
            fetcher.delay = max(fetcher.delay, min(float(crawl_delay), 60.0))
        seeds = [scope.start, *sorted(k for k in known if scope.contains(k))]
        if source.sitemap == "auto":
            listed_pages, problems = sitemap_urls(fetcher, listed)
            seeds += [u for u in (scope.normalize(x) for x in listed_pages) if u and scope.contains(u)]
            crawl.skipped += [SkippedFile(scope.start, problem) for problem in problems]
        _Walk(kb, scope, fetcher, robots, cache, crawl, progress).run(seeds)
    finally:
        crawl.stats.requests += fetcher.requests
        fetcher.close()


class _Walk:
    """Breadth-first fetching of one source, a wave of links per depth, `concurrency` at a time."""

    def __init__(self, kb: KBConfig, scope: Scope, fetcher: Fetcher, robots: urllib.robotparser.RobotFileParser,
                 cache: PageCache, crawl: Crawl, progress: Progress | None):
        self.kb, self.scope, self.fetcher, self.robots = kb, scope, fetcher, robots
        self.cache, self.crawl, self.progress = cache, crawl, progress
        self.source = scope.source
        self.requested: set[str] = set()
        self.disallowed: set[str] = set()  # by robots.txt: reported once, never requested
        self.answered = 0
        self.ids: set[str] = {f.doc_id for f in crawl.files}  # two sources of a KB may reach one page

    def allowed(self, url: str) -> bool:
        return self.scope.contains(url) and self.robots.can_fetch(self.source.user_agent, url)

    def run(self, seeds: list[str]) -> None:
        frontier = list(dict.fromkeys(seeds))
        with ThreadPoolExecutor(self.source.concurrency, thread_name_prefix="mcp-kb-crawl") as pool:
            for depth in range(self.source.max_depth + 1):
                wave = self._admit(frontier)
                found: list[str] = []
                for url, answer in zip(wave, pool.map(self._fetch, wave)):
                    found += self._take(url, answer)
                    self.answered += 1
                    if self.progress:
                        self.progress(self.answered, len(self.requested),
                                      f"{self.kb.name}: crawled {self.answered} pages of {self.scope.start}")
                following = found if depth < self.source.max_depth else []
                if len(self.requested) >= self.source.max_pages:
                    self._stop_at_max_pages(frontier + following)  # this wave's unadmitted links and the next's
                    return
                if not following:
                    return
                frontier = following

    def _admit(self, frontier: list[str]) -> list[str]:
        """The next wave: new URLs that robots.txt allows, up to max_pages in all."""
        wave = []
        for url in dict.fromkeys(frontier):
            if url in self.requested or url in self.disallowed or len(self.requested) >= self.source.max_pages:
                continue
            if self.robots.can_fetch(self.source.user_agent, url):
                self.requested.add(url)
                wave.append(url)
            else:
                self.disallowed.add(url)
                self.crawl.skipped.append(SkippedFile(url, "disallowed by robots.txt"))
        return wave

    def _stop_at_max_pages(self, links: list[str]) -> None:
        left = len({url for url in links if url not in self.requested and url not in self.disallowed})
        if left:
            self.crawl.stats.stopped_at_max_pages += left
            self.crawl.skipped.append(SkippedFile(self.scope.start, f"crawl stopped at max_pages = "
                                                  f"{self.source.max_pages}: {left} more links in scope not fetched"))

    def _fetch(self, url: str) -> Fetched:
        return self.fetcher.get(url, self.cache.get(url), allowed=self.allowed)

    def _take(self, url: str, answer: Fetched) -> list[str]:
        """Record one answer; returns the links to follow from it."""
        cached = self.cache.get(url)
        if answer.final_url:
            self.requested.add(answer.final_url)
        if answer.not_modified and cached:
            self.crawl.stats.not_modified += 1
            return self._keep(cached)
        if answer.status == 200:
            self.crawl.stats.downloaded += 1
            return self._store(url, answer)
        if answer.status in _GONE:
            self.cache.forget(url)
        if answer.transient and cached:  # the indexed version stays; its links still lead on
            self.crawl.skipped.append(SkippedFile(cached.doc_id, answer.error, unreadable=True))
            return cached.links
        self.crawl.skipped.append(SkippedFile(url, answer.error or f"HTTP {answer.status}", unreadable=answer.transient))
        return []

    def _store(self, url: str, answer: Fetched) -> list[str]:
        suffix = suffix_for(answer.final_url, answer.content_type)
        if suffix is None:
            self.crawl.skipped.append(SkippedFile(answer.final_url, f"unsupported content type "
                                                                    f"{answer.content_type or '(none)'}"))
            return []
        body = answer.body if is_binary_format(suffix) or not answer.charset else as_utf8(answer.body, answer.charset)
        links: list[str] = []
        canonical, noindex = None, False
        if suffix == ".html":
            links, canonical, noindex = page_links(body, answer.final_url, self.scope)
        page = CachedPage(url, canonical or answer.final_url, body_file_name(url, body, suffix), answer.etag,
                          answer.last_modified, links, indexable=not noindex)
        self.cache.put(page, body)
        return self._keep(page)

    def _keep(self, page: CachedPage) -> list[str]:
        if page.indexable and page.doc_id not in self.ids:
            self.ids.add(page.doc_id)
            self.crawl.files.append(_source_file(self.cache, page))
        return page.links


def _source_file(cache: PageCache, page: CachedPage) -> SourceFile:
    path = cache.body_path(page)
    info = path.stat()
    return SourceFile(path, page.doc_id, info.st_size, info.st_mtime_ns)


class WebSource:
    """The KB's `urls` as one source: document ids are normalized URLs, bodies live in the page cache."""

    ROOTED_ID = _ORIGIN  # a path filter starting with "/" matches pages by URL path, on any host

    def __init__(self, kb: KBConfig, cache_folder: Path):
        self.kb = kb
        self.cache_folder = cache_folder

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[WebSource]:
        return [cls(kb, cache_folder)] if kb.urls else []

    owns = staticmethod(is_url)

    @staticmethod
    def kind_of(doc_id: str) -> str:
        """"web page" for an HTML page, else the suffix of the file it serves ("pdf")."""
        suffix = posixpath.splitext(urlsplit(doc_id).path)[1].lower()
        return "web page" if suffix in _PAGE_SUFFIXES or not is_supported(suffix) else suffix.lstrip(".")

    def scan(self, known: dict[str, tuple[int, int]], progress: Progress | None = None) -> SourceScan:
        crawl = crawl_kb(self.kb, self.cache_folder, [doc_id for doc_id in known if is_url(doc_id)], progress)
        return SourceScan(crawl.files, crawl.skipped, asdict(crawl.stats))

    def find(self, doc_id: str) -> SourceFile:
        return find_page(self.kb, self.cache_folder, doc_id)

    def watch_folders(self) -> list[Path]:
        return []  # pages change on their site: `[kb.sync] interval` (or watch's default) crawls again

    def concerns(self, path: Path) -> bool:
        return False
