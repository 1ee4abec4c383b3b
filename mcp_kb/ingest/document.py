"""The shared document model every parser returns and the chunker reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Block:
    """A unit of text in reading order: a paragraph, list, code fence, table, page paragraph or record."""

    text: str
    heading_path: tuple[str, ...] = ()
    page: int | None = None  # 1-based, PDFs only
    line_start: int | None = None  # 1-based, inclusive
    line_end: int | None = None
    atomic: bool = False  # code fences and tables: never split inside unless larger than a whole chunk


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
    metadata: dict[str, Any] = field(default_factory=dict)
    one_chunk_per_block: bool = False  # JSON records are never packed together
    sections_apart: bool = False  # code's symbols, a notebook's cells: a chunk never holds two, however small
    notes: tuple[str, ...] = ()  # non-fatal problems worth reporting (e.g. scanned pages)
    ocr_pages: int = 0  # pages (or images) whose text came from OCR
    pages: int | None = None  # a PDF's pages, those without text included
    # A text source's own text (newlines normalized), when its blocks carry their real lines: it is then the
    # document's reading form, line for line, and `headings` its outline (ingest/reading.py).
    source: str | None = None
    headings: tuple[Heading, ...] = ()
