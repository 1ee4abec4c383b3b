"""The one schema: the columns of a chunk table and the types a filterable field may have.

Config (reserved names, built-in filters), the store (Arrow schema), sync (rows and value
coercion), filters (which conditions a type takes) and the tool schema read this module: adding
a column is one field of `ChunkRow`, adding a filter type one entry of `FIELD_TYPES`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BUILTIN_FILTERS",
    "FIELD_TYPES",
    "RANGE_OPERATORS",
    "FieldType",
]  # what the core's API (mcp_kb.api) offers from this module

# Integer columns are int64: values outside this range can not be stored or compared.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


RANGE_OPERATORS = ("gt", "gte", "lt", "lte")  # a filter's bounds on a number or a date
TEXT_OPERATORS = ("prefix", "glob")  # a filter's matches on text


@dataclass(frozen=True)
class FieldType:
    """What a filterable field holds and which conditions it takes."""

    arrow: str  # the column's Arrow type, by name (see _arrow)
    python: type  # the type of one value a caller sends
    ranges: bool = False  # gt / gte / lt / lte
    text_match: bool = False  # prefix / glob
    many: bool = False  # the column holds a list; a condition matches when any item does
    pattern: str = ""  # a regular expression a text value must match in full
    hint: str = "text"  # how to write a value, for error messages


FieldTypeName = Literal["string", "integer", "number", "boolean", "date", "string[]"]
FIELD_TYPES: dict[str, FieldType] = {
    "string": FieldType("string", str, text_match=True),
    "integer": FieldType("int64", int, ranges=True, hint="a whole number"),
    "number": FieldType("float64", float, ranges=True, hint="a number"),
    "boolean": FieldType("bool", bool, hint="true or false"),
    # ISO dates compare correctly as text.
    "date": FieldType("string", str, ranges=True, pattern=r"\d{4}(-\d{2}(-\d{2})?)?", hint="a date as YYYY-MM-DD"),
    "string[]": FieldType("list<string>", str, many=True),
}


@dataclass(frozen=True)
class ChunkRow:
    """One row of a chunk table: the single list of its built-in columns (metadata columns follow)."""

    id: str
    path: str
    chunk_index: int
    heading: str
    title: str
    page: int | None
    line_start: int | None
    line_end: int | None
    text: str
    search_text: str  # the keyword analysis of title, heading path and text (keywords.py)
    field_text: str  # the keyword analysis of title and heading path alone: matches there can count extra
    content_hash: str
    file_hash: str
    n_tokens: int
    # JSON: [[heading path, line_start, line_end, page, at, opening], ...] per section in its text (chunking.ChunkPart)
    parts: str
    vector: list[float]

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))  # shallow: vectors are not copied


@dataclass(frozen=True)
class ReadingRow:
    """One row of a generation's reading table: a document's reading form (ingest/reading.py) and what a listing
    shows of it. Offsets count characters of `text`."""

    path: str
    title: str
    kind: str
    size: int  # of the source, in bytes
    mtime_ns: int  # the source's last change
    file_hash: str
    synced_at: str  # when this version was indexed (ISO 8601, UTC)
    pages: int | None
    lines: int
    tokens: int
    chunks: int
    text: str
    outline: str  # JSON: [[heading path], start, end] per heading, in order
    page_numbers: list[int]
    page_starts: list[int]
    chunk_starts: list[int]
    as_written: bool  # `text` is the source's own text, line for line (layout 3 on; else extracted text)

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))


# What a listing reads of a reading row: everything but the text and its offsets.
LISTING_COLUMNS = [
    "path",
    "title",
    "kind",
    "size",
    "mtime_ns",
    "file_hash",
    "synced_at",
    "pages",
    "lines",
    "tokens",
    "chunks",
]


VECTOR_COLUMN = "vector"
KEYWORD_COLUMN = "search_text"  # what the full-text index covers
FIELD_COLUMN = "field_text"  # what says what a chunk is about; its own full-text index, boosted per KB
RESERVED_FIELDS = frozenset(field.name for field in dataclasses.fields(ChunkRow))
# Built-in columns every KB can filter on, with the description the search tool shows.
BUILTIN_FILTERS = {
    "path": "Source file path relative to the KB root; a value, a list (one of), or {prefix} / {glob}",
    "title": "Document title",
    "heading": "Heading path of the chunk (e.g. 'Install › Linux')",
    "page": "PDF page number; a value, a list, or a range {gte, lte}",
    "chunk_index": "Position of the chunk in its document",
}
# What a search reads of the chunks that made the cut.
HIT_COLUMNS = [
    "id",
    "path",
    "chunk_index",
    "heading",
    "title",
    "page",
    "line_start",
    "line_end",
    "text",
    "n_tokens",
    "parts",
]


# The field type of a Python value (bool before int: True is an int too).
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def field_type_of_value(value: Any) -> str:
    """The field type a static metadata value gives its column."""
    return next((name for kind, name in _TYPE_NAMES.items() if isinstance(value, kind)), "string")


def _field_type_of(annotation: Any) -> str:
    inner = (
        [arg for arg in get_args(annotation) if arg is not type(None)]
        if get_origin(annotation) in (Union, UnionType)
        else []
    )
    return _TYPE_NAMES[inner[0] if inner else annotation]


_HINTS = get_type_hints(ChunkRow)
BUILTIN_FILTER_FIELDS: dict[str, str] = {name: _field_type_of(_HINTS[name]) for name in BUILTIN_FILTERS}


def _arrow(name: str) -> pa.DataType:
    import pyarrow as pa  # imported here: config reads this module and must stay quick to import

    if name == "list<string>":
        return pa.list_(pa.string())
    return {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}[name]


def reading_schema() -> pa.Schema:
    """The Arrow schema of a generation's reading table (ReadingRow's columns)."""
    import pyarrow as pa

    types = {
        str: pa.string(),
        int: pa.int64(),
        int | None: pa.int32(),
        list[int]: pa.list_(pa.int64()),
        bool: pa.bool_(),
    }
    return pa.schema(
        [
            (name, pa.large_string() if name == "text" else types[annotation])
            for name, annotation in get_type_hints(ReadingRow).items()
        ]
    )


def chunk_schema(dimension: int, metadata_types: dict[str, str]) -> pa.Schema:
    """The Arrow schema of a KB's chunk table: ChunkRow's columns, then one typed column per metadata field."""
    import pyarrow as pa

    fields = []
    for name, annotation in _HINTS.items():
        if name == VECTOR_COLUMN:
            fields.append((name, pa.list_(pa.float32(), dimension)))
        else:
            fields.append((name, _arrow(FIELD_TYPES[_field_type_of(annotation)].arrow)))
    fields += [(name, _arrow(FIELD_TYPES[kind].arrow)) for name, kind in sorted(metadata_types.items())]
    return pa.schema(fields)


def coerce(value: Any, kind: str) -> Any:
    """A front-matter or static value in a metadata column's type; None when it does not fit."""
    if value is None:
        return None
    try:
        if kind == "string[]":
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
        if kind == "date":
            return value.isoformat()[:10] if isinstance(value, (dt.date, dt.datetime)) else str(value)[:10]
        if kind == "integer":
            number = int(value)
            return number if INT64_MIN <= number <= INT64_MAX else None
        if kind == "number":
            return float(value)
        if kind == "boolean":
            return value if isinstance(value, bool) else str(value).lower() in ("true", "yes", "1")
        return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    except (TypeError, ValueError, OverflowError):
        return None
