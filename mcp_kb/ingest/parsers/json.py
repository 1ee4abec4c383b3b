"""JSON and JSON Lines: one block (and so one chunk) per record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..document import Document, Headings
from ...errors import ParseError
from .text import read_text

_TITLE_KEYS = ("title", "name", "question", "id", "_id")


def parse(path: Path, doc_id: str) -> Document:
    text = read_text(path)
    records = _jsonl_records(text) if path.suffix.lower() != ".json" else _json_records(text)
    blocks = []
    headings = Headings()  # each record is a section of its own, though two share a title
    for number, record in enumerate(records, start=1):
        body = _render(record).strip()
        if body:
            headings.meet(1, _record_title(record, number))
            blocks.append(headings.block(body))
    return Document(doc_id, "json", path.stem, tuple(blocks), one_chunk_per_block=True)


def _json_records(text: str) -> list[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"parse error: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    return data if isinstance(data, list) else [data]


def _jsonl_records(text: str) -> list[Any]:
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ParseError(f"parse error: invalid JSON on line {number}: {exc.msg}") from exc
    return records


def _record_title(record: Any, number: int) -> str:
    if isinstance(record, dict):
        for key in _TITLE_KEYS:
            if isinstance(record.get(key), (str, int)) and str(record[key]).strip():
                return str(record[key]).strip()[:120]
    return f"record {number}"


def _render(value: Any, indent: str = "") -> str:
    """Readable `key: value` lines; the model embeds this, so no JSON punctuation noise."""
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                lines.append(f"{indent}{key}:\n{_render(item, indent + '  ')}")
            else:
                lines.append(f"{indent}{key}: {item}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(
            _render(item, indent) if isinstance(item, (dict, list)) else f"{indent}- {item}" for item in value
        )
    return f"{indent}{value}"
