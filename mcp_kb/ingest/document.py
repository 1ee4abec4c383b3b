"""The shared document model every parser returns and the chunker reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..text import shared_depth


@dataclass(frozen=True)
class Block:
    """A unit of text in reading order: a paragraph, list, code fence, table, page paragraph or record."""

    text: str
    heading_path: tuple[str, ...] = ()
    page: int | None = None  # 1-based, PDFs only
    line_start: int | None = None  # 1-based, inclusive
    line_end: int | None = None
    atomic: bool = False  # code fences and tables: never split inside unless larger than a whole chunk
    # The depth of the shallowest heading met right before it, in a converted document (Headings sets it): a
    # heading met again after a section of its own path opens a new section (two `## Notes` in a row are two).
    opens: int | None = None

    def headings_kept(self, previous: tuple[str, ...]) -> int:
        """How many of its headings go on from the block before it (whose path is `previous`); the rest open."""
        shared = shared_depth(previous, self.heading_path)
        return shared if self.opens is None else min(shared, self.opens)


class Headings:
    """The headings open at a point of a converted document as its parser meets them, and the blocks made under
    them: the first block after a heading says where headings opened (Block.opens)."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []  # (level, text), outermost first
        self._opened: int | None = None

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self._open)

    def meet(self, level: int, text: str) -> None:
        """A heading of `level` (1: outermost) closes those open at its level or deeper and opens its own."""
        self._open = [heading for heading in self._open if heading[0] < level]
        depth = len(self._open)
        self._opened = depth if self._opened is None else min(self._opened, depth)
        self._open.append((level, text))

    def block(self, text: str, below: tuple[str, ...] = (), **fields: Any) -> Block:
        """A block under the open headings (and `below`, a code symbol's path); `fields`: Block's others."""
        block = Block(text, self.path + below, opens=self._opened, **fields)
        self._opened = None
        return block


@dataclass(frozen=True)
class Heading:
    """A heading (or a code symbol) of a text source: its path and the lines it spans (1-based, inclusive; its
    subsections included)."""

    path: tuple[str, ...]
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Document:
    """A parsed file: its title, blocks and metadata (front matter, PDF info)."""

    doc_id: str
    kind: str  # markdown, pdf, text, html, json
    title: str
    blocks: tuple[Block, ...]
    metadata: dict[str, object] = field(default_factory=dict)
    one_chunk_per_block: bool = False  # JSON records are never packed together
    sections_apart: bool = False  # code's symbols, a notebook's cells: a chunk never holds two, however small
    notes: tuple[str, ...] = ()  # non-fatal problems worth reporting (e.g. scanned pages)
    ocr_pages: int = 0  # pages (or images) whose text came from OCR
    pages: int | None = None  # a PDF's pages, those without text included
    # A text source's own text (newlines normalized), when its blocks carry their real lines: it is then the
    # document's reading form, line for line, and `headings` its outline (ingest/reading.py).
    source: str | None = None
    headings: tuple[Heading, ...] = ()
