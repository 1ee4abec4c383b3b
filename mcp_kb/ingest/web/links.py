"""The links of an HTML page that a crawl follows, its canonical URL and its robots meta."""

from __future__ import annotations

import re
from urllib.parse import urljoin


from .urls import Scope


def page_links(body: bytes, url: str, scope: Scope) -> tuple[list[str], str | None, bool]:
    """In-scope links of an HTML page (none when its robots meta says nofollow), its canonical URL
    (if in scope), and whether its robots meta says noindex."""
    from bs4 import BeautifulSoup  # imported on first crawl, not at server start

    from ..parsers.html import decode_html

    try:
        soup = BeautifulSoup(decode_html(body), "html.parser")
    except Exception:  # an undecodable or broken page has no links to follow
        return [], None, False
    base_tag = soup.find("base", href=True)
    base = urljoin(url, str(base_tag["href"])) if base_tag else url
    robots_meta = " ".join(
        str(m.get("content", "")) for m in soup.find_all("meta", attrs={"name": re.compile("^robots$", re.I)})
    )
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
