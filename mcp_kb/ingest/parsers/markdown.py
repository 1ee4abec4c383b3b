"""Markdown via markdown-it-py: heading tree, YAML front matter, fences and tables kept whole."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt

from ..document import Block, Document, Heading
from .markup import heading_text, readable
from .text import read_text

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.S)
_ATOMIC = {"fence", "code_block", "table_open"}
# Only block structure is needed: skipping inline parsing halves the parse time.
_MARKDOWN = MarkdownIt("commonmark").enable("table").disable("inline")


def parse(path: Path, doc_id: str) -> Document:
    text = read_text(path)
    metadata, body, offset = split_front_matter(text)
    blocks, headings, first_h1 = _blocks(body, offset)
    title = str(metadata.get("title") or first_h1 or path.stem)
    return Document(
        doc_id, "markdown", title, tuple(blocks), metadata, source=text, headings=_spans(headings, text.split("\n"))
    )


def split_front_matter(text: str) -> tuple[dict[str, Any], str, int]:  # yaml.safe_load's mapping
    """(metadata, body, number of lines removed); bad YAML is kept as text, not lost."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text, 0
    try:
        metadata = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return {}, text, 0
    if not isinstance(metadata, dict):
        return {}, text, 0
    return metadata, text[match.end() :], match.group().count("\n")


def _spans(headings: list[tuple[tuple[str, ...], int]], lines: list[str]) -> tuple[Heading, ...]:
    """Each heading (path, 1-based line) with the lines it spans: to the last line with text before the next heading
    of its level or above, or before the end."""
    ends = [len(lines)] * len(headings)
    open_ones: list[int] = []  # headings whose section has not ended, outermost first
    for index, (path, line) in enumerate(headings):  # one pass (a slice of the rest per heading was quadratic)
        while open_ones and len(headings[open_ones[-1]][0]) >= len(path):
            ends[open_ones.pop()] = line - 1
        open_ones.append(index)
    spans = []
    for (path, line), last in zip(headings, ends):
        while last > line and not lines[last - 1].strip():
            last -= 1
        spans.append(Heading(path, line, last))
    return tuple(spans)


def _blocks(body: str, line_offset: int) -> tuple[list[Block], list[tuple[tuple[str, ...], int]], str | None]:
    lines = body.split("\n")
    tokens = _MARKDOWN.parse(body)
    headings: list[tuple[int, str]] = []  # (level, text) of the open sections
    blocks: list[Block] = []
    heading_lines: list[tuple[int, str]] = []  # (line, text): the text of a file that holds only headings
    outline: list[tuple[tuple[str, ...], int]] = []  # (path, line) of every heading
    first_h1 = None
    for index, token in enumerate(tokens):
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        if token.type == "heading_open":
            level = int(token.tag[1])
            heading = heading_text(tokens[index + 1].content)
            headings = [h for h in headings if h[0] < level] + [(level, heading)]
            if level == 1 and first_h1 is None:
                first_h1 = heading
            outline.append((tuple(h[1] for h in headings), token.map[0] + 1 + line_offset))
            if heading:
                heading_lines.append((token.map[0] + 1 + line_offset, heading))
            continue
        start, end = token.map
        block_text = "\n".join(lines[start:end]).strip()
        if token.type != "code_block":  # indented code has no markup to drop
            block_text = readable(block_text)
        if not block_text:
            continue
        blocks.append(
            Block(
                block_text,
                heading_path=tuple(h[1] for h in headings),
                line_start=start + 1 + line_offset,
                line_end=end + line_offset,
                atomic=token.type in _ATOMIC,
            )
        )
    if not blocks and heading_lines:  # a note that is only its title (and outline) is still found by it
        blocks.append(
            Block(
                "\n".join(text for _, text in heading_lines),
                heading_path=(),
                line_start=heading_lines[0][0],
                line_end=heading_lines[-1][0],
            )
        )
    return blocks, outline, first_h1
