"""A KB's generations of tables: their names, their creation, and dropping (or letting go of) the ones not in use.

A KB's chunks and manifest live in one generation of tables, named by an id that never repeats. The KB's state
row (state_table.py) names the active generation; a rebuild fills a new generation beside it and switches by
rewriting that one row, so readers see the old version or the new one, never a half-built index.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import StoreError
from ..settings import KB_NAME_CHARS
from .contract import FileRecord
from .failures import store_failures
from .readings import create as create_reading_table

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables

# Tables of one generation: `<kb>__chunks__<id>`, `<kb>__files__<id>`, `<kb>__reading__<id>` (readings.py) (no id:
# made before generations).
_GENERATION_TABLE = re.compile(
    rf"^(?P<kb>[{KB_NAME_CHARS}]+?)__(?:chunks|files|reading)(?:__(?P<generation>[0-9a-f]{{12}}))?$"
)
# The manifest table's columns are FileRecord's fields (`from __future__` keeps their types as text).
FILE_SCHEMA = pa.schema(
    [
        (item.name, pa.int32() if item.name == "n_chunks" else pa.int64() if item.type == "int" else pa.string())
        for item in dataclasses.fields(FileRecord)
    ]
)


def chunk_table_name(kb: str, generation: str) -> str:
    return f"{kb}__chunks__{generation}" if generation else f"{kb}__chunks"


def file_table_name(kb: str, generation: str) -> str:
    return f"{kb}__files__{generation}" if generation else f"{kb}__files"


def chunk_table(tables: Tables, kb: str, generation: str | None) -> LanceTable | None:
    """The generation's chunk table, or None if there is none (nor a generation)."""
    return None if generation is None else tables.table(chunk_table_name(kb, generation))


def file_table(tables: Tables, kb: str, generation: str | None) -> LanceTable | None:
    """The generation's manifest table, or None if there is none (nor a generation)."""
    return None if generation is None else tables.table(file_table_name(kb, generation))


def written_chunk_table(tables: Tables, kb: str, generation: str) -> LanceTable:
    """The chunk table a sync writes into: it made it, so none is an error (another process dropped it)."""
    return _made(chunk_table(tables, kb, generation), kb, generation, "chunk table")


def written_file_table(tables: Tables, kb: str, generation: str) -> LanceTable:
    """The manifest table a sync writes into (as written_chunk_table)."""
    return _made(file_table(tables, kb, generation), kb, generation, "file list")


def _made(table: LanceTable | None, kb: str, generation: str, what: str) -> LanceTable:
    if table is None:
        raise StoreError(f"knowledge base {kb!r}: generation {generation} has no {what}; sync again")
    return table


@store_failures("create a generation's tables")
def create(tables: Tables, kb: str, generation: str, schema: pa.Schema) -> None:
    """Empty tables for a generation; tables that already exist (a build being resumed) are kept."""
    tables.db.create_table(chunk_table_name(kb, generation), schema=schema, exist_ok=True)
    tables.db.create_table(file_table_name(kb, generation), schema=FILE_SCHEMA, exist_ok=True)
    create_reading_table(tables, kb, generation)


def drop_all_but(tables: Tables, kb: str, keep: set[str]) -> list[str]:
    """Drop every table generation of the KB except `keep`; returns the dropped generations."""
    dropped = set()
    for name in sorted(tables.names()):
        generation = _generation_of(name, kb)
        if generation is not None and generation not in keep:
            tables.drop(name)
            dropped.add(generation)
    return sorted(dropped)


@store_failures("drop old tables")
def forget_all_but(tables: Tables, kb: str, generation: str) -> None:
    """Let go of the handles of the KB's other generations: a sync in another process dropped them (or is
    filling one, which reopens when read), and a server would otherwise keep two per rebuild for its life."""
    for name in tables.held():
        other = _generation_of(name, kb)
        if other is not None and other != generation:
            tables.forget(name)


def _generation_of(name: str, kb: str) -> str | None:
    """The generation a table of the KB belongs to ("": made before generations), or None: not the KB's."""
    match = _GENERATION_TABLE.match(name)
    return (match["generation"] or "") if match and match["kb"] == kb else None
