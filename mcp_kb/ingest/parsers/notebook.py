"""Jupyter notebooks (.ipynb): markdown and code cells in order, outputs left out.

A markdown heading names what follows it, across cells, as in a Markdown file; code cells are cut by
their syntax (parsers/code.py) when the notebook's language is Python, else kept as text, and their
symbols go under the headings above them (`Training › fit`). A cell has no line numbers a reader could
open, so its blocks carry none.
"""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ..document import Block, Document, Headings
from ...errors import ParseError
from ...settings import megabytes
from .bounds import check_time
from .code import code_blocks
from .text import normalize_newlines, read_text

# Outputs (plots as base64) make most of a notebook's size; the JSON is read whole, at a few times its size.
MAX_NOTEBOOK_BYTES = megabytes(100)
_MARKDOWN = MarkdownIt("commonmark").enable("table").disable("inline")  # block structure only, as markdown.py
_ATOMIC = {"fence", "code_block", "table_open"}

Cell = tuple[str, str]  # (cell type, source)


def parse(path: Path, doc_id: str) -> Document:
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ParseError(
            f"notebook of {size / 1024**2:.0f} MB, over the {MAX_NOTEBOOK_BYTES // 1024**2} MB "
            f"limit; clear its outputs to index it"
        )
    cells, language = _cells(read_text(path))
    headings = Headings()
    blocks: list[Block] = []
    notes: dict[str, None] = {}  # each note once, in order
    for cell_type, source in cells:
        check_time()
        if cell_type == "markdown":
            blocks.extend(_markdown_blocks(source, headings))
        elif cell_type in ("code", "raw"):
            code, note = _code_blocks(source, language if cell_type == "code" else None, headings)
            blocks.extend(code)
            if note:
                notes[note] = None
    return Document(
        doc_id, "notebook", path.name, tuple(blocks), {"language": language}, notes=tuple(notes), sections_apart=True
    )


def _cells(text: str) -> tuple[list[Cell], str]:
    """The cells of a notebook (nbformat 4) and its language; a file that is not one is a ParseError saying why."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"parse error: invalid notebook JSON at line {exc.lineno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise ParseError("parse error: invalid notebook: its JSON nests too deeply") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ParseError("parse error: not a Jupyter notebook: no list of cells (nbformat 4 or later)")
    cells = []
    for number, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise ParseError(f"parse error: not a Jupyter notebook: cell {number} has no cell_type")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ParseError(f"parse error: not a Jupyter notebook: the source of cell {number} is not text")
        cells.append((cell["cell_type"], normalize_newlines(source)))
    return cells, _language(data.get("metadata"))


def _language(metadata: Any) -> str:
    """The notebook's language, by its kernel; Python when it names none (as Jupyter's own notebooks)."""
    if isinstance(metadata, dict):
        for key, name_key in (("kernelspec", "language"), ("language_info", "name")):
            section = metadata.get(key)
            if isinstance(section, dict) and isinstance(section.get(name_key), str) and section[name_key].strip():
                return str(section[name_key]).strip().lower()[:40]
    return "python"


def _markdown_blocks(source: str, headings: Headings) -> list[Block]:
    """A markdown cell's blocks under the headings open so far; its own headings update `headings`."""
    lines = source.split("\n")
    tokens = _MARKDOWN.parse(source)
    blocks = []
    for index, token in enumerate(tokens):
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        if token.type == "heading_open":
            headings.meet(int(token.tag[1]), tokens[index + 1].content.strip())
            continue
        start, end = token.map
        text = "\n".join(lines[start:end]).strip()
        if text:
            blocks.append(headings.block(text, atomic=token.type in _ATOMIC))
    return blocks


def _code_blocks(source: str, language: str | None, headings: Headings) -> tuple[list[Block], str | None]:
    """A code cell's blocks: each symbol's (or the top-level code's) lines as one block, under the open headings."""
    lines = source.split("\n")
    blocks, note = code_blocks(source, "python" if language == "python" else None)
    runs = (list(run) for _, run in groupby(blocks, key=lambda block: block.heading_path))
    return [
        headings.block("\n".join(lines[(run[0].line_start or 1) - 1 : run[-1].line_end]), run[0].heading_path)
        for run in runs
    ], note
