"""robots.txt rules and the site's sitemaps (index files followed, .gz read) for a crawl's seeds."""

from __future__ import annotations

import io
import re
import urllib.robotparser
import zlib

from ...errors import KBError
from ...settings import megabytes
from .fetch import Fetcher, inflate

_MAX_SITEMAPS = 20  # sitemap files read per source (an index may name many)
_SITEMAP_BYTES = megabytes(50)  # the sitemap protocol's own limit per file
_ROBOTS_BYTES = 512 * 1024
_MAX_SITEMAP_URLS = 50_000  # the sitemap protocol's own limit per file
_MAX_SITEMAP_ELEMENTS = 1_000_000  # parser events read per file: a full sitemap with every optional field is far below
# "&" that starts no character or entity reference: real sitemaps write `?a=1&b=2` unescaped
_BARE_AMPERSAND = re.compile(rb"&(?!#[0-9]+;|#x[0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9._-]*;)")


def read_robots(fetcher: Fetcher) -> tuple[urllib.robotparser.RobotFileParser, list[str]]:
    """The host's robots.txt rules and sitemap URLs; a missing file allows everything.

    A robots.txt that cannot be read for a transient reason stops the crawl (RFC 9309: assume
    everything is disallowed), which the sync reports and survives by keeping its pages.
    """
    robots = urllib.robotparser.RobotFileParser()
    url = fetcher.scope.origin + "/robots.txt"
    answer = fetcher.get(url, limit=_ROBOTS_BYTES, allowed=fetcher.scope.on_host)
    if answer.transient:
        raise KBError(f"{url}: {answer.error}")
    lines = answer.body.decode("utf-8", "replace").splitlines() if answer.status == 200 else []
    robots.parse(lines)
    return robots, list(robots.site_maps() or [])


def sitemap_urls(fetcher: Fetcher, listed: list[str]) -> tuple[list[str], list[str]]:
    """Page URLs from the site's sitemaps (index files followed, .gz read), and problems met."""
    scope = fetcher.scope
    on_host = [u for u in (scope.normalize(x) for x in listed) if u and scope.on_host(u)]
    queue = on_host or [scope.origin + "/sitemap.xml"]
    pages, problems, seen = [], [], set[str]()
    while queue and len(seen) < _MAX_SITEMAPS:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        answer = fetcher.get(url, limit=_SITEMAP_BYTES, allowed=scope.on_host)
        if answer.status != 200:
            if on_host:  # a sitemap robots.txt names should be there; /sitemap.xml is only a guess
                problems.append(f"sitemap {url}: {answer.error or answer.status}")
            continue
        body = answer.body
        if body[:2] == b"\x1f\x8b":
            try:
                body = inflate(body, _SITEMAP_BYTES)
            except zlib.error as exc:
                problems.append(f"sitemap {url}: not valid gzip ({exc})")
                continue
        try:
            kind, locations = _sitemap_entries(body)
        except ValueError as exc:
            if on_host:  # a guessed /sitemap.xml is often a site's "not found" page
                problems.append(f"sitemap {url}: {exc}")
            continue
        if kind == "sitemapindex":
            queue += [u for u in (scope.normalize(x) for x in locations) if u and scope.on_host(u)]
        else:
            pages += locations
    return pages, problems


def _sitemap_entries(body: bytes) -> tuple[str, list[str]]:
    """A sitemap's kind ("urlset" or "sitemapindex") and its <loc> URLs, read by an XML parser (CDATA,
    entities, namespace prefixes and comments as XML means them). The parser forgives what real
    sitemaps get wrong (a bare "&" in a URL) but never resolves entities or reaches the network, so a
    DTD's entity bomb or an external entity is text it does not expand. It streams, dropping each
    element once read, and stops at the protocol's URL count or at `_MAX_SITEMAP_ELEMENTS`: a flood of
    empty elements costs neither memory (a whole tree of 12M of them took 1.6 GB) nor minutes."""
    from lxml import etree  # imported on first crawl, not at server start

    kind, locations = "", []
    events = etree.iterparse(
        io.BytesIO(_BARE_AMPERSAND.sub(b"&amp;", body)),
        events=("start", "end"),
        recover=True,
        resolve_entities=False,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        load_dtd=False,
    )
    try:
        for ended, (event, element) in enumerate(events):
            if event == "start":
                kind = kind or etree.QName(element).localname
                continue
            text = (element.text or "").strip()
            if text and etree.QName(element).localname == "loc":
                locations.append(text)
            if len(locations) >= _MAX_SITEMAP_URLS or ended >= _MAX_SITEMAP_ELEMENTS:
                break
            parent = element.getparent()
            if parent is not None:
                del parent[:]  # every child of it has ended: read, and not needed again
    except etree.XMLSyntaxError as exc:
        if not kind:
            raise ValueError(f"not XML ({exc})") from None
    if not kind:
        raise ValueError("not XML")
    return kind, locations
