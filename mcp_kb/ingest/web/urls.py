"""Web page URLs: one normal form per page (so a page is one document), the scope a web source may
crawl, and what a URL or content type says a body is."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit


from ...settings import WebSourceConfig
from ...errors import ConfigError
from ..parsers import HTML_SUFFIXES, is_supported

_SUFFIX_BY_TYPE = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "application/pdf": ".pdf",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".txt",
    "application/json": ".json",
    "text/csv": ".csv",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
}
PAGE_SUFFIXES = {*HTML_SUFFIXES, ".php", ".asp", ".aspx", ".jsp", ""}  # served as HTML, whatever the name

_PATH_SAFE = "/%:@!$&'()*+,;=~"  # what stays as it is in a path; spaces and non-ASCII become %XX
_PERCENT_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")
_HOST = re.compile(r"^[a-z0-9._~:-]+$")  # a DNS name, IPv4 or IPv6 address: nothing an HTTP request would refuse


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
        folder = parts.path[: parts.path.rfind("/") + 1]
        return cls(source, start, urlunsplit((parts.scheme, parts.netloc, folder, "", "")))

    @property
    def origin(self) -> str:
        parts = urlsplit(self.start)
        return f"{parts.scheme}://{parts.netloc}"

    def on_host(self, url: str) -> bool:
        """Whether a URL is on the start URL's host (scheme and port included): robots.txt and sitemaps."""
        return url.startswith(self.origin + "/")

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


def suffix_for(url: str, content_type: str) -> str | None:
    """The parser suffix for a body: HTML by its content type, else the URL's suffix when a parser
    reads it (a README.md served as text/plain), else the content type's."""
    if _SUFFIX_BY_TYPE.get(content_type) == ".html":
        return ".html"
    suffix = posixpath.splitext(urlsplit(url).path)[1].lower()
    if suffix not in PAGE_SUFFIXES and is_supported(suffix):
        return suffix
    return _SUFFIX_BY_TYPE.get(content_type)
