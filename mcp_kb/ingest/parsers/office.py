"""Word (.docx) and PowerPoint (.pptx) via python-docx and python-pptx.

Both read the Office Open XML parts directly (no converter process, pure Python on lxml) and
expose what citations need: Word's paragraph styles (Heading 1..9, Title) become the heading
path; a slide's title is its heading and its number the citation's page. Headers, footers and
comments are left out; tables become Markdown-like tables kept whole; speaker notes are included,
marked as notes. Legacy binary .doc/.ppt files and files whose extension lies get one-line reasons.
"""

from __future__ import annotations

import re
import zipfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..document import Block, Document, Headings
from ...errors import ParseError
from .bounds import check_package, check_time

_HEADING_STYLE = re.compile(r"^(?:Heading|标题)\s*(\d)$", re.I)
_LIST_STYLE = re.compile(r"List", re.I)
_OLE_MAGIC = b"\xd0\xcf\x11\xe0"  # the old binary formats, and password-protected Office files


def parse_docx(path: Path, doc_id: str) -> Document:
    from docx import Document as open_docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = open_docx(str(checked_package(path, "Word")))
    # Paragraph.style resolves the default style by scanning every style, per paragraph (20,000
    # paragraphs took 130 s): names by style id, looked up once.
    style_names = {style.style_id: style.name for style in document.styles}
    default_style = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = default_style.name if default_style is not None else ""
    headings = Headings()
    blocks: list[Block] = []
    list_items: list[str] = []

    def flush_list() -> None:
        if list_items:
            blocks.append(headings.block("\n".join(list_items), atomic=True))
            list_items.clear()

    for item in document.iter_inner_content():  # body paragraphs and tables in reading order
        check_time()
        if isinstance(item, Table):
            flush_list()
            table = _markdown_table([[cell.text.strip() for cell in row.cells] for row in item.rows])
            if table:
                blocks.append(headings.block(table, atomic=True))
            continue
        assert isinstance(item, Paragraph)
        text = item.text.strip()
        style_id = item._p.style  # the pStyle value (python-docx has no public accessor for the id)
        style = style_names.get(style_id, "") if style_id else default_name
        level = _heading_level(style)
        if level and text:
            flush_list()
            headings.meet(level, text)
        elif text and _LIST_STYLE.search(style):
            list_items.append(f"- {text}")
        elif text:
            flush_list()
            blocks.append(headings.block(text))
    flush_list()
    properties = document.core_properties
    title = (properties.title or "").strip() or path.stem
    return Document(doc_id, "docx", title, tuple(blocks), _core_metadata(properties))


def parse_pptx(path: Path, doc_id: str) -> Document:
    from pptx import Presentation

    presentation = Presentation(str(checked_package(path, "PowerPoint")))
    blocks: list[Block] = []
    headings = Headings()  # each slide is a section of its own, though two share a title
    for number, slide in enumerate(presentation.slides, start=1):
        check_time()
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        headings.meet(1, title or f"Slide {number}")
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame and shape.text_frame.text.strip():
                blocks.append(headings.block(shape.text_frame.text.strip(), page=number))
            elif getattr(shape, "has_table", False) and shape.has_table:
                table = _markdown_table([[cell.text.strip() for cell in row.cells] for row in shape.table.rows])
                if table:
                    blocks.append(headings.block(table, page=number, atomic=True))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                blocks.append(headings.block(f"Speaker notes: {notes}", page=number))
        if title and not any(block.page == number for block in blocks):
            blocks.append(headings.block(title, page=number))  # a title-only slide still says something
    properties = presentation.core_properties
    return Document(
        doc_id, "pptx", (properties.title or "").strip() or path.stem, tuple(blocks), _core_metadata(properties)
    )


def checked_package(path: Path, kind: str) -> Path:
    """The file, if it is an Office Open XML package; else a one-line reason."""
    with path.open("rb") as handle:
        head = handle.read(8)
    if head.startswith(_OLE_MAGIC):
        old = {".doc": ".docx", ".ppt": ".pptx", ".xls": ".xlsx"}.get(path.suffix.lower())
        if old:
            raise ParseError(f"unsupported: the old binary {kind} format ({path.suffix}); save it as {old} to index it")
        raise ParseError(f"encrypted: the {kind} file is password-protected")
    if not zipfile.is_zipfile(path):
        raise ParseError(f"not a {kind} file: a {path.suffix} must be a zip package (the extension may be wrong)")
    check_package(path, kind)
    return path


def _heading_level(style: str) -> int:
    if style.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(style)
    return int(match.group(1)) if match else 0


def _markdown_table(rows: list[list[str]]) -> str:
    """Rows as a Markdown table (the first row is the header); merged cells repeat as Word reports them."""
    rows = [[cell.replace("|", "\\|").replace("\n", " ") for cell in row] for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _core_metadata(properties: Any) -> dict[str, object]:
    """Author and dates from the document's core properties (filterable when a KB declares them; the
    title is the document's title)."""
    metadata: dict[str, object] = {}
    for key, value in (
        ("author", properties.author),
        ("created", properties.created),
        ("modified", properties.modified),
    ):
        if isinstance(value, (datetime, date)):
            metadata[key] = value.date().isoformat() if isinstance(value, datetime) else value.isoformat()
        elif value:
            metadata[key] = str(value).strip()
    return metadata
