"""Cut documents into chunks that fit the embedding model, keeping structure and context.

Sections (one heading, as the outline counts them, and one page) are packed block by block; a block too long for a
chunk is split at paragraphs, then lines, then sentences (English and Chinese), then words, and last by token count.
Consecutive chunks of one section overlap (code's do not: a chunk of code is its own lines); tiny neighbours are
merged, each keeping its place as a part of the chunk (heading path, lines, page) so a hit cites the one its evidence
is in. A converted document's chunks cite the lines of its reading form, a text source's the file's own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..errors import ParseError
from ..settings import ChunkingConfig
from ..models.base import TokenCounter
from ..slices import sliced
from ..text import SENTENCE_END, SENTENCE_ENDS_BEFORE, SENTENCE_SPLIT, shared_depth, without_overlap
from ..vocabulary import HEADING_SEPARATOR
from .document import Block, Document
from .reading import Section, heading_line, render, section_names
from .parsers.bounds import check_chunks

# Split points, coarse to fine; each keeps its separator with the piece before it.
_SPLIT_LEVELS = [
    re.compile(r"(?<=\n\n)"),
    re.compile(r"(?<=\n)"),
    SENTENCE_SPLIT,
    re.compile(r"(?<=[，、,\s])"),
]
_COUNT_SLICE = 2048  # texts per token-count call
_NOT_SPACE = re.compile(r"\S")
_CHARS_PER_TOKEN_BEYOND = 32  # a block longer than this many characters per token of budget is split unasked
_FIRST_WINDOW_CHARS_PER_TOKEN = 4  # a hard cut's first window; later ones follow the cuts made
# Where an overlap may begin, best first: after a sentence end or a line break, then after a clause
# mark or a space. Never inside a word if it can be helped.
_WORD_END = re.compile(r"[，、]|,?\s+")
_WORD_ENDS_BEFORE = re.compile(r"[，、\s]$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")  # the line under a Markdown table's header
_MIN_OVERLAP_SHARE = 3  # a sentence start that keeps less than 1/3 of the overlap loses to a word start


@dataclass(frozen=True)
class ChunkPart:
    """A section (or symbol) inside a chunk: small sections are merged into one chunk, each keeping its heading path
    and span, so a hit can cite the one its evidence is in."""

    heading_path: tuple[str, ...]
    line_start: int | None
    line_end: int | None
    page: int | None
    at: int  # where it begins in the chunk's text (at its heading line, when the text names it)
    opening: str  # the line that opens it where a passage's text shows a new section begin ("" for code's symbols)
    occurrences: tuple[int, ...]  # of each heading of its path: 2 for the second section of that path, ...
    heading: str = ""  # as the outline names it (reading.section_names), given once the document's chunks are made

    @property
    def section(self) -> tuple[tuple[str, ...], tuple[int, ...], int | None]:
        """Which section it is part of: its path, which of each heading's sections, its page."""
        return self.heading_path, self.occurrences, self.page


@dataclass(frozen=True)
class Chunk:
    """A piece of a document, ready to embed and index."""

    doc_id: str
    chunk_index: int
    text: str
    heading_path: tuple[str, ...]
    title: str
    page: int | None
    line_start: int | None
    line_end: int | None
    n_tokens: int
    metadata: dict[str, object] = field(default_factory=dict)
    offset: int = 0  # where its own text (after the overlap) begins in the document's reading form (reading.py)
    parts: tuple[ChunkPart, ...] = ()  # its sections, in order (one, unless small sections were merged into it)
    occurrences: tuple[int, ...] = ()  # of each heading of its path (ChunkPart.occurrences)

    @property
    def heading(self) -> str:
        return HEADING_SEPARATOR.join(self.heading_path)

    @property
    def parts_json(self) -> str:
        """Its parts as its row keeps them (schema.ChunkRow.parts; passages.parts_of reads them)."""
        return json.dumps(
            [[part.heading, part.line_start, part.line_end, part.page, part.at, part.opening] for part in self.parts],
            ensure_ascii=False,
        )

    @property
    def embed_text(self) -> str:
        """What is embedded and keyword-indexed: the heading path gives the text its context."""
        return f"{self.heading}\n{self.text}" if self.heading_path else self.text

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.embed_text.encode("utf-8")).hexdigest()


def effective_max_tokens(settings: ChunkingConfig, counter: TokenCounter) -> int:
    """The configured size, never more than the model reads (less its [CLS]/[SEP] tokens)."""
    return min(settings.max_tokens, counter.max_tokens - 2)


def document_chunks(document: Document, settings: ChunkingConfig, counter: TokenCounter) -> list[Chunk]:
    """A parsed document's chunks, as a sync indexes them: a chunker failure, no text or more chunks than
    one file may make is a ParseError for that file."""
    try:
        chunks = chunk_document(document, settings, counter)
    except MemoryError:  # the worker process running this reports it (ingest/workers.py)
        raise
    except Exception as exc:  # a chunker bug on odd input fails this file, not the sync
        raise ParseError(f"chunking failed: {type(exc).__name__}: {exc}") from exc
    if not chunks:
        raise ParseError("nothing to index: the file has no text")
    check_chunks(len(chunks))
    return chunks


def chunk_document(document: Document, settings: ChunkingConfig, counter: TokenCounter) -> list[Chunk]:
    """All chunks of a document, numbered in reading order."""
    max_tokens = effective_max_tokens(settings, counter)
    overlap = min(settings.overlap, max_tokens // 4)
    chunks: list[Chunk] = []
    rendered = render(document)
    starts = rendered.block_starts
    if document.source is None:  # lines are the reading form's, where a read by lines finds them
        document = _on_reading_lines(document, rendered.text, starts)
    occurrences = _occurrences(document)
    if document.sections_apart:  # code: a chunk is its own lines, nothing of the one before
        overlap = 0
    sizing = _Sizing(max_tokens, overlap, counter)
    for section in _sections(document, settings, occurrences):
        chunks.extend(_chunk_section(document, section, starts, sizing, occurrences[section[0]]))
    if not document.one_chunk_per_block and not document.sections_apart:
        chunks = _merge_small(chunks, settings.min_tokens, max_tokens, counter)
    names = _section_names(rendered.sections)
    return [
        replace(chunk, chunk_index=index, parts=tuple(_named(part, names) for part in chunk.parts))
        for index, chunk in enumerate(chunks)
    ]


def _section_names(sections: Sequence[Section]) -> dict[tuple[tuple[str, ...], int], str]:
    """The outline's name of each section (reading.section_names, over the sections render() gives, which the
    reader names alike), by its path and which section of that path it is (ChunkPart.occurrences)."""
    seen: Counter[tuple[str, ...]] = Counter()
    keys = []
    for section in sections:
        seen[section.path] += 1
        keys.append((section.path, seen[section.path]))
    return dict(zip(keys, section_names(section.path for section in sections)))


def _named(part: ChunkPart, names: dict[tuple[tuple[str, ...], int], str]) -> ChunkPart:
    number = part.occurrences[-1] if part.occurrences else 1
    return replace(part, heading=names.get((part.heading_path, number), HEADING_SEPARATOR.join(part.heading_path)))


def _on_reading_lines(document: Document, text: str, starts: tuple[int, ...]) -> Document:
    """A converted document whose blocks are numbered by the lines of its reading form (a PDF page's own lines, or
    none at all, would not read back)."""
    blocks, line, counted = [], 1, 0
    for block, start in zip(document.blocks, starts):
        line += text.count("\n", counted, start)
        counted = start
        blocks.append(replace(block, line_start=line, line_end=line + block.text.count("\n")))
    return replace(document, blocks=tuple(blocks))


def _occurrences(document: Document) -> list[tuple[int, ...]]:
    """For each block, which section of its path each of its headings opens (1: the first section of that path, 2:
    the second, ...), as the outline counts them: a text source's headings, a converted one's as rendered."""
    seen: Counter[tuple[str, ...]] = Counter()
    numbers = []
    if document.source is not None:
        headings = iter(sorted(document.headings, key=lambda heading: heading.line_start))
        pending = next(headings, None)
        current: dict[tuple[str, ...], int] = {}
        for block in document.blocks:
            while pending is not None and pending.line_start <= (block.line_start or 0):
                seen[pending.path] += 1
                current[pending.path] = seen[pending.path]
                pending = next(headings, None)
            path = block.heading_path
            numbers.append(tuple(current.get(path[: depth + 1], 1) for depth in range(len(path))))
        return numbers
    previous: tuple[str, ...] = ()
    for block in document.blocks:  # render() opens a heading where the path changes or opens anew
        path = block.heading_path
        for depth in range(block.headings_kept(previous), len(path)):
            seen[path[: depth + 1]] += 1
        previous = path
        numbers.append(tuple(max(seen[path[: depth + 1]], 1) for depth in range(len(path))))
    return numbers


def _sections(document: Document, settings: ChunkingConfig, occurrences: list[tuple[int, ...]]) -> list[list[int]]:
    """Runs of blocks (by position) that share a section (heading path, which one of that path) and page (or single
    records)."""
    blocks = document.blocks
    if document.one_chunk_per_block:
        return [[index] for index in range(len(blocks))]
    structural = settings.strategy in ("auto", "markdown")

    def key(index: int) -> tuple[object, ...]:
        block = blocks[index]
        return (block.heading_path, occurrences[index], block.page) if structural else (block.page,)

    sections: list[list[int]] = []
    for index in range(len(blocks)):
        if sections and key(index) == key(sections[-1][-1]):
            sections[-1].append(index)
        else:
            sections.append([index])
    return sections


@dataclass(frozen=True)
class _Piece:
    """A block, or a part of one too long for a chunk, with its tokens and where it begins in the reading form."""

    block: Block
    size: int
    offset: int


@dataclass(frozen=True)
class _Sizing:
    """How large a document's chunks may be (`max_tokens`), how many tokens of the one before each repeats, and the
    tokenizer that counts them."""

    max_tokens: int
    overlap: int
    counter: TokenCounter


def _chunk_section(
    document: Document, positions: list[int], starts: tuple[int, ...], sizing: _Sizing, occurrences: tuple[int, ...]
) -> list[Chunk]:
    max_tokens, overlap, counter = sizing.max_tokens, sizing.overlap, sizing.counter
    blocks = [document.blocks[index] for index in positions]
    heading_path = blocks[0].heading_path
    prefix_tokens = counter.count([HEADING_SEPARATOR.join(heading_path)])[0] + 1 if heading_path else 0
    budget = max(max_tokens - prefix_tokens - overlap, max_tokens // 2)
    pieces: list[_Piece] = []
    for block, size, start in zip(blocks, _block_sizes(blocks, budget, counter), (starts[i] for i in positions)):
        if size <= budget:
            pieces.append(_Piece(block, size, start))
        else:
            texts = _split_table(block.text, budget, counter) or split_text(block.text, budget, counter)
            pieces.extend(
                _Piece(replace(block, text=text), n, start + at)
                for text, n, at in zip(texts, _counted(texts, counter), _positions(block.text, texts))
            )
    chunks = []
    previous_text = None
    for group in _pack(pieces, budget):
        text = _joined([piece.block for piece in group])
        body = text
        if previous_text is not None and overlap:
            text = overlap_text(previous_text, overlap, counter) + "\n" + text
        previous_text = body
        first, last = group[0].block, group[-1].block
        opening = "" if document.sections_apart else heading_line(heading_path, len(heading_path) - 1)
        part = ChunkPart(heading_path, first.line_start, last.line_end, first.page, 0, opening, occurrences)
        chunks.append(
            Chunk(
                document.doc_id,
                0,
                text,
                heading_path,
                document.title,
                first.page,
                first.line_start,
                last.line_end,
                0,
                document.metadata,
                offset=group[0].offset,
                parts=(part,),
                occurrences=occurrences,
            )
        )
    sizes = _counted([chunk.embed_text for chunk in chunks], counter)
    return [replace(chunk, n_tokens=size) for chunk, size in zip(chunks, sizes)]


def _joined(blocks: list[Block]) -> str:
    """The texts of blocks packed into one chunk: those on consecutive lines of the file (statements of code) by a
    line break, as they stood; the others by a blank line."""
    parts = [blocks[0].text]
    for before, block in zip(blocks, blocks[1:]):
        adjacent = before.line_end is not None and block.line_start == before.line_end + 1
        parts.append(("\n" if adjacent else "\n\n") + block.text)
    return "".join(parts)


def _block_sizes(blocks: list[Block], budget: int, counter: TokenCounter) -> list[int]:
    """Each block's tokens; a block far longer than any text of `budget` tokens is not counted (a 4 MB line
    cost 1.7 GB of encodings) but marked over budget, since splitting it finds its size piece by piece."""
    longest = budget * _CHARS_PER_TOKEN_BEYOND
    counts = iter(_counted([block.text for block in blocks if len(block.text) <= longest], counter))
    return [next(counts) if len(block.text) <= longest else budget + 1 for block in blocks]


def overlap_text(previous: str, overlap: int, counter: TokenCounter) -> str:
    """The end of the previous chunk, repeated at the start of the next: about `overlap` tokens,
    beginning at a sentence when one begins early enough in that span, else at a word."""
    tail = counter.tail(previous, overlap)
    before = previous[max(0, len(previous) - len(tail) - 8) : len(previous) - len(tail)]
    if len(tail) == len(previous) or SENTENCE_ENDS_BEFORE.search(before):
        return tail.strip()
    sentence = SENTENCE_END.search(tail)
    if sentence and len(tail) - sentence.end() >= len(tail) // _MIN_OVERLAP_SHARE:
        return tail[sentence.end() :].strip()
    if _WORD_ENDS_BEFORE.search(before):
        return tail.strip()
    word = _WORD_END.search(tail)
    if word and word.end() < len(tail):
        return tail[word.end() :].strip()
    return tail.strip()  # one unbroken run (e.g. Chinese without punctuation): any character starts a word


def split_text(text: str, budget: int, counter: TokenCounter, level: int = 0) -> list[str]:
    """Split text longer than `budget` tokens into pieces that fit, at the coarsest boundary that works."""
    while level < len(_SPLIT_LEVELS):
        parts = [part for part in _SPLIT_LEVELS[level].split(text) if part]
        level += 1
        if len(parts) > 1:
            return _pack_strings(parts, budget, counter, level)
    return _hard_cut(text, budget, counter)


def _pack_strings(parts: list[str], budget: int, counter: TokenCounter, next_level: int) -> list[str]:
    sizes = _counted(parts, counter)
    pieces: list[str] = []
    current, current_size = "", 0
    for part, size in zip(parts, sizes):
        if size > budget:
            if current.strip():
                pieces.append(current.strip())
            current, current_size = "", 0
            pieces.extend(split_text(part, budget, counter, next_level))
        elif current_size + size > budget:
            if current.strip():
                pieces.append(current.strip())
            current, current_size = part, size
        else:
            current, current_size = current + part, current_size + size
    if current.strip():
        pieces.append(current.strip())
    return pieces


def _split_table(text: str, budget: int, counter: TokenCounter) -> list[str]:
    """A Markdown table too large for one chunk, cut between rows, each piece under the header
    (so every chunk knows its columns); [] when `text` is not a table."""
    lines = text.split("\n")
    if len(lines) < 3 or not lines[0].startswith("|") or not _TABLE_RULE.match(lines[1]):
        return []
    header = "\n".join(lines[:2])
    room = max(budget - counter.count([header])[0] - 1, budget // 4)
    rows = _pack_strings([line + "\n" for line in lines[2:]], room, counter, next_level=2)
    return [f"{header}\n{piece}" for piece in rows]


def _counted(parts: list[str], counter: TokenCounter) -> list[int]:
    """Token counts of `parts`, asked in slices: one call for 800,000 words held a gigabyte of encodings."""
    return [size for some in sliced(parts, _COUNT_SLICE) for size in counter.count(some)]


def _hard_cut(text: str, budget: int, counter: TokenCounter) -> list[str]:
    pieces = []
    text = text.strip()
    start = 0  # where the rest begins (slicing the rest off for every chunk copied the file each time)
    window = budget * _FIRST_WINDOW_CHARS_PER_TOKEN
    while start < len(text):
        head, window = _head(text, start, budget, counter, window)
        head = head or text[start]
        pieces.append(head.strip())
        following = _NOT_SPACE.search(text, start + len(head))
        start = following.start() if following else len(text)
    return [piece for piece in pieces if piece]


def _head(text: str, start: int, budget: int, counter: TokenCounter, window: int) -> tuple[str, int]:
    """counter.head(text, budget) found by encoding a window of the text rather than all of it (encoding the
    rest for every chunk made chunking quadratic: 800 KB of Chinese without punctuation took minutes), and
    the window for the next cut. A cut in the window's first half cannot depend on where the window ends;
    otherwise the window is doubled. The next window is twice this cut, so each chunk's text is encoded
    about twice."""
    while start + window < len(text):
        head = counter.head(text[start : start + window], budget)
        if len(head) <= window // 2:
            return head, max(2 * len(head) + 2, budget)
        window *= 2
    return counter.head(text[start:], budget), window


def _positions(text: str, pieces: list[str]) -> list[int]:
    """Where each piece of a split block begins in it: pieces are its stripped parts in order (a table's repeat
    its header, found by their first row); a piece not found starts where the one before it did."""
    found, at = [], 0
    for piece in pieces:
        probe = piece.split("\n", 2)[2] if _split_header(piece) else piece
        position = text.find(probe[:200], at)
        at = position if position >= 0 else at
        found.append(at)
    return found


def _split_header(piece: str) -> bool:
    lines = piece.split("\n", 2)
    return len(lines) == 3 and lines[0].startswith("|") and bool(_TABLE_RULE.match(lines[1]))


def _pack(pieces: list[_Piece], budget: int) -> list[list[_Piece]]:
    """Greedy packing of whole blocks (with their token counts) into groups of at most `budget` tokens."""
    groups: list[list[_Piece]] = []
    size_of_group = 0
    for piece in pieces:
        if groups and size_of_group + piece.size <= budget:
            groups[-1].append(piece)
            size_of_group += piece.size
        else:
            groups.append([piece])
            size_of_group = piece.size
    return groups


def _merge_small(chunks: list[Chunk], min_tokens: int, max_tokens: int, counter: TokenCounter) -> list[Chunk]:
    """Fold a chunk under `min_tokens` into its next neighbour on the same page when both fit."""
    merged: list[Chunk] = []
    for chunk in chunks:
        if merged and merged[-1].n_tokens < min_tokens and merged[-1].page == chunk.page:
            candidate = _join(merged[-1], chunk)
            size = counter.count([candidate.embed_text])[0]
            if size <= max_tokens:
                merged[-1] = replace(candidate, n_tokens=size)
                continue
        merged.append(chunk)
    return merged


def _join(first: Chunk, second: Chunk) -> Chunk:
    """One chunk from two neighbours; the path is what they share, each one's own headings open its text as the
    document writes them (Markdown `#` lines), and each keeps its parts (a heading line alone is the part of its
    section, which holds the ones below it)."""
    shared = first.heading_path[
        : _same_sections(first.heading_path, first.occurrences, second.heading_path, second.occurrences)
    ]
    last, following = first.parts[-1], second.parts[0]
    if last.section == following.section:  # one section: its overlap once
        own = without_overlap(first.text, second.text)
        cut = len(second.text) - len(own)
        second = replace(
            second, text=own, parts=tuple(replace(part, at=max(part.at - cut, 0)) for part in second.parts)
        )
    still_open = _same_sections(last.heading_path, last.occurrences, second.heading_path, second.occurrences)
    first_text, first_parts = _headed(first, shared, 0)
    second_text, second_parts = _headed(second, second.heading_path[:still_open], len(first_text) + 2)
    parts = [*first_parts, *second_parts]
    last, following = first_parts[-1], second_parts[0]
    if last.section == following.section:  # one section cut in two
        parts[len(first_parts) - 1 : len(first_parts) + 1] = [replace(last, line_end=following.line_end)]
    return replace(
        first,
        text=f"{first_text}\n\n{second_text}",
        heading_path=shared,
        line_end=second.line_end,
        parts=tuple(parts),
        occurrences=first.occurrences[: len(shared)],
    )


def _same_sections(
    path: tuple[str, ...], occurrences: tuple[int, ...], other: tuple[str, ...], other_occurrences: tuple[int, ...]
) -> int:
    """How many leading headings two paths share as the same sections (not only by name)."""
    depth = shared_depth(path, other)
    return next((d for d in range(depth) if occurrences[d : d + 1] != other_occurrences[d : d + 1]), depth)


def _headed(chunk: Chunk, shared: tuple[str, ...], start: int) -> tuple[str, list[ChunkPart]]:
    """A chunk's text opened by its headings below `shared` (those the text before it has not opened), and its parts
    placed in it from `start`."""
    path, own = chunk.heading_path, chunk.parts[0]
    lines = [heading_line(path, depth) for depth in range(len(shared), len(path))]
    offsets = [sum(len(line) + 1 for line in lines[:index]) for index in range(len(lines))]
    head = sum(len(line) + 1 for line in lines)
    parts = [
        ChunkPart(path[: depth + 1], None, None, chunk.page, start + at, line, chunk.occurrences[: depth + 1])
        for depth, line, at in zip(range(len(shared), len(path)), lines, offsets)
    ]
    opened = [index for index, part in enumerate(parts) if part.heading_path == own.heading_path]
    if opened:  # its own heading line opens its first part
        parts[opened[0]] = replace(own, at=parts[opened[0]].at)
        parts += [replace(part, at=start + head + part.at) for part in chunk.parts[1:]]
    else:
        parts += [replace(part, at=start + head + part.at) for part in chunk.parts]
    return "\n".join([*lines, chunk.text]), parts
