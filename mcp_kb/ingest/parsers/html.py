"""HTML: the main content only (trafilatura drops navigation, sidebars, footers, cookie banners),
read by BeautifulSoup with headings as the heading path and code blocks whole."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.filter import SoupStrainer  # its home since bs4 4.13: the package's __all__ leaves it out

from ..document import Block, Document, Headings
from .text import decode_bytes, normalize_newlines

_DROP = ["script", "style", "nav", "header", "footer", "aside", "noscript", "template", "form", "svg"]
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = {"p", "pre", "li", "table", "blockquote", "dd", "dt", "figcaption"}
# <meta charset="…"> or <meta http-equiv="Content-Type" content="text/html; charset=…">, within the
# first kilobytes as HTML requires
_META_CHARSET = re.compile(rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]{1,40})", re.I)
_META_SCAN_BYTES = 4096


def parse(path: Path, doc_id: str) -> Document:
    html = decode_html(path.read_bytes())
    head = BeautifulSoup(html, "html.parser", parse_only=SoupStrainer("title"))  # the whole page only if needed
    title = head.title.get_text(" ", strip=True) if head.title else ""
    blocks = _blocks(_main_content(html) or _fallback_root(html))
    first_heading = next((b.heading_path[0] for b in blocks if b.heading_path), None)
    return Document(doc_id, "html", title or first_heading or path.stem, tuple(blocks))


def decode_html(data: bytes) -> str:
    """An HTML page's text, by the charset its <meta> declares when the bytes are not UTF-8."""
    declared = _META_CHARSET.search(data[:_META_SCAN_BYTES])
    return normalize_newlines(decode_bytes(data, declared[1].decode("ascii") if declared else ""))


def _main_content(html: str) -> Tag | None:
    """The page's main content as trafilatura sees it (None when it finds none)."""
    import trafilatura  # imported on first HTML file: it costs a starting server half a second

    extracted = trafilatura.extract(
        html,
        output_format="html",
        include_formatting=True,
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        favor_recall=True,
        config=_trafilatura_settings(),
    )
    if not extracted:
        return None
    return BeautifulSoup(extracted, "html.parser").body


@functools.cache
def _trafilatura_settings() -> Any:
    from trafilatura.settings import use_config

    settings = use_config()
    # By default a main text under 250 characters is replaced by a flat dump of the whole page
    # (navigation included, headings lost); a short page's own structure is worth more.
    settings.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")
    return settings


def _fallback_root(html: str) -> Tag:
    page = BeautifulSoup(html, "html.parser")
    for tag in page.find_all(_DROP):
        tag.decompose()
    return page.find("main") or page.find("article") or page.body or page


def _blocks(root: Tag) -> list[Block]:
    headings = Headings()
    blocks = []
    for element in root.find_all(_HEADINGS | _BLOCKS):
        # A <p> inside an <li>, or inline code (trafilatura writes it as <pre>) inside a paragraph
        # or heading: the enclosing element already holds the text.
        if element.find_parent(_BLOCKS | _HEADINGS):
            continue
        if element.name in _HEADINGS:
            headings.meet(int(element.name[1]), element.get_text(" ", strip=True))
            continue
        text = _element_text(element)
        if text:
            atomic = element.name in ("pre", "table")
            blocks.append(headings.block(text, atomic=atomic))
    if not blocks:
        text = root.get_text("\n", strip=True)
        blocks = [Block(text)] if text else []
    return blocks


def _element_text(element: Tag) -> str:
    if element.name == "table":
        return _table_text(element)
    if element.name == "pre":  # code: its own line breaks and indentation, as written
        while element.pre:  # trafilatura nests a code block's <pre> in another, indented for display
            element = element.pre
        return element.get_text().strip("\n").rstrip()
    return element.get_text(" ", strip=True)


def _table_text(table: Tag) -> str:
    rows = []
    for row in table.find_all("tr"):
        cells = [cell.get_text(" ", strip=True) for cell in row.find_all(["th", "td"])]
        rows.append(" | ".join(cells))
    return "\n".join(rows)
