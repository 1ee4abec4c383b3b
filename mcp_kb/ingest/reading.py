"""A document's reading form: its text as one string, its outline, where each page and each chunk begins. A sync
stores it beside the chunks, so a document is read, browsed and cited from the index alone, exactly as it was indexed
(no source needed, no text twice: chunks overlap, this does not).

A text source (Markdown, plain text, code) reads as the file itself: its lines are the file's lines, the numbers a
hit cites, and its headings or symbols are an outline over them. A converted format (PDF, Office, HTML, OCR) reads as
its extracted text with headings as Markdown `#` lines and PDF page markers.

Offsets are characters of the text; lines and pages are derived from them where they are shown.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..vocabulary import HEADING_SEPARATOR
from .document import Document

_JOIN = "\n\n"  # between blocks, headings and page markers


def page_marker(page: int) -> str:
    return f"--- page {page} ---"


@dataclass(frozen=True)
class Section:
    """One heading of the outline: its path, and the text it spans (its subsections included)."""

    path: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class Rendered:
    """A document's text, where each of its blocks begins in it, its headings and where each page begins."""

    text: str
    block_starts: tuple[int, ...]
    sections: tuple[Section, ...]
    page_starts: tuple[tuple[int, int], ...]  # (page number, offset of its marker)


@dataclass(frozen=True)
class Reading:
    """What the index keeps of a document for reading it: text, outline, pages, and where each chunk begins."""

    title: str
    kind: str  # markdown, pdf, html, ... (the parser's)
    text: str
    sections: tuple[Section, ...]
    page_starts: tuple[tuple[int, int], ...]
    chunk_starts: tuple[int, ...]  # chunk_index -> offset where its own text (not its overlap) begins
    tokens: int  # of the whole text, as its chunks counted it
    pages: int | None  # a PDF's pages, those without text included
    as_written: bool  # the text is the source's own, line for line (else extracted from a converted format)


def heading_line(path: tuple[str, ...], depth: int) -> str:
    """The heading at `depth` of a path as a Markdown line (`## Install`), as a reading form writes it."""
    return f"{'#' * (depth + 1)} {path[depth]}" if 0 <= depth < len(path) else ""


def line_count(text: str) -> int:
    """The lines of a text: a final line break ends its last line, it does not begin another."""
    return text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0


def section_names(paths: Iterable[tuple[str, ...]]) -> list[str]:
    """Each section's name, as the outline shows it, a citation gives it and a read takes it: its heading path,
    numbered from the second time that name comes (`Guide › Notes (2)`), and on until it names no other section
    (a heading written `Notes (2)`, or one holding the separator: `A › B` beside `A` then `B`)."""
    taken: set[str] = set()
    numbered: Counter[str] = Counter()  # the last number given to each name: where to go on from
    names = []
    for path in paths:
        base = name = HEADING_SEPARATOR.join(path)
        while name in taken:
            numbered[base] = max(numbered[base], 1) + 1
            name = f"{base} ({numbered[base]})"
        taken.add(name)
        names.append(name)
    return names


def render(document: Document) -> Rendered:
    """The document's reading form: a text source's own text, else its blocks with their headings (Markdown `#` by
    depth) and, for PDFs, page markers."""
    if document.source is not None:
        return _as_written(document, document.source)
    parts: list[str] = []
    starts: list[int] = []
    open_sections: list[tuple[tuple[str, ...], int]] = []  # headings whose end is not known yet
    sections: list[Section] = []
    pages: list[tuple[int, int]] = []
    size = 0  # the length of the text so far

    def add(part: str) -> int:
        nonlocal size
        start = size + (len(_JOIN) if parts else 0)
        parts.append(part)
        size = start + len(part)
        return start

    path: tuple[str, ...] = ()
    page = None
    for block in document.blocks:
        shared = block.headings_kept(path)
        _close(open_sections, sections, depth=shared, end=size)
        if block.page is not None and block.page != page:
            page = block.page
            pages.append((page, add(page_marker(page))))
        for depth in range(shared, len(block.heading_path)):
            open_sections.append((block.heading_path[: depth + 1], add(heading_line(block.heading_path, depth))))
        path = block.heading_path
        starts.append(add(block.text))
    _close(open_sections, sections, depth=0, end=size)
    return Rendered(_JOIN.join(parts), tuple(starts), tuple(sorted(sections, key=lambda s: s.start)), tuple(pages))


def _as_written(document: Document, text: str) -> Rendered:
    """A text source as it is: each block begins at its first line, each heading spans its lines."""
    starts = [0, *(match.end() for match in re.finditer("\n", text))]  # where each line begins

    def begins(line: int | None) -> int:
        return starts[min(max((line or 1) - 1, 0), len(starts) - 1)]

    def ends(line: int) -> int:  # the end of a line's text, its line break left out
        return starts[line] - 1 if 0 < line < len(starts) else len(text)

    sections = tuple(
        Section(heading.path, begins(heading.line_start), max(ends(heading.line_end), begins(heading.line_start)))
        for heading in document.headings
    )
    return Rendered(
        text,
        tuple(begins(block.line_start) for block in document.blocks),
        tuple(sorted(sections, key=lambda s: s.start)),
        (),
    )


def _close(open_sections: list[tuple[tuple[str, ...], int]], sections: list[Section], depth: int, end: int) -> None:
    """End the open sections deeper than `depth` headings at `end`."""
    while len(open_sections) > depth:
        path, start = open_sections.pop()
        sections.append(Section(path, start, end))


def reading_of(document: Document, chunk_starts: Sequence[int], tokens: int) -> Reading:
    """The reading form of a parsed document, given where its chunks begin in it (the chunker's offsets, set on this
    rendering) and their tokens."""
    rendered = render(document)
    last_marked = max((page for page, _ in rendered.page_starts), default=None)
    return Reading(
        document.title,
        document.kind,
        rendered.text,
        rendered.sections,
        rendered.page_starts,
        tuple(chunk_starts),
        tokens,
        document.pages or last_marked,
        document.source is not None,
    )


def outline_json(sections: tuple[Section, ...]) -> str:
    """The outline as a reading row keeps it."""
    return json.dumps([[list(s.path), s.start, s.end] for s in sections], ensure_ascii=False)


def outline_of(stored: str) -> tuple[Section, ...]:
    return tuple(Section(tuple(path), start, end) for path, start, end in json.loads(stored or "[]"))
