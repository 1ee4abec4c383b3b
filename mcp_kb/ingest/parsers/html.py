"""HTML via BeautifulSoup: main content only, headings as the heading path."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup, Tag

from ..document import Block, Document
from .text import read_text

_DROP = ["script", "style", "nav", "header", "footer", "aside", "noscript", "template", "form", "svg"]
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = {"p", "pre", "li", "table", "blockquote", "dd", "dt", "figcaption"}


def parse(path: Path, doc_id: str) -> Document:
    soup = BeautifulSoup(read_text(path), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    blocks = _blocks(root)
    if not blocks:
        text = root.get_text("\n", strip=True)
        blocks = [Block(text)] if text else []
    first_heading = next((b.heading_path[0] for b in blocks if b.heading_path), None)
    return Document(doc_id, "html", title or first_heading or path.stem, tuple(blocks))


def _blocks(root: Tag) -> list[Block]:
    headings: list[tuple[int, str]] = []
    blocks = []
    for element in root.find_all(_HEADINGS | _BLOCKS):
        if element.find_parent(_BLOCKS):  # a <p> inside an <li>: its parent already holds the text
            continue
        if element.name in _HEADINGS:
            level = int(element.name[1])
            headings = [h for h in headings if h[0] < level] + [(level, element.get_text(" ", strip=True))]
            continue
        text = _table_text(element) if element.name == "table" else element.get_text(" ", strip=True)
        if text:
            atomic = element.name in ("pre", "table")
            blocks.append(Block(text, heading_path=tuple(h[1] for h in headings), atomic=atomic))
    return blocks


def _table_text(table: Tag) -> str:
    rows = []
    for row in table.find_all("tr"):
        cells = [cell.get_text(" ", strip=True) for cell in row.find_all(["th", "td"])]
        rows.append(" | ".join(cells))
    return "\n".join(rows)
