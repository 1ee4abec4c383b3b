"""A generation's reading table: one row per indexed document holding its reading form (ingest/reading.py), written
with its chunks, so documents are read, listed and outlined from the index alone. A generation built before
reading tables existed has none; a full sync builds one."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..lru import BoundedLRU
from ..schema import LISTING_COLUMNS, ReadingRow, reading_schema
from .connection import all_paths, replace_paths
from .failures import store_failures
from .filters import sql_equals, sql_in_batches

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables

_ROWS_KEPT_BYTES = 32 * 1024**2  # of reading rows: a 4 MB document read in parts is read from the index once
_LISTINGS_KEPT = 8  # listings of (table, version) kept in memory: a browse of 100,000 documents reads one


def reading_table_name(kb: str, generation: str) -> str:
    return f"{kb}__reading__{generation}"


def reading_table(tables: Tables, kb: str, generation: str | None) -> LanceTable | None:
    """The generation's reading table; None when it has none (built before reading tables, or no generation)."""
    return None if generation is None else tables.table(reading_table_name(kb, generation))


@store_failures("create a generation's reading table")
def create(tables: Tables, kb: str, generation: str) -> None:
    tables.db.create_table(reading_table_name(kb, generation), schema=reading_schema(), exist_ok=True)


@store_failures("be written (documents' reading forms)")
def replace(tables: Tables, kb: str, generation: str, paths: Sequence[str], rows: Sequence[ReadingRow]) -> None:
    """Make `rows` the reading forms of `paths` in one commit (a path without a row loses its old one). A
    generation without a reading table (built before them) is left so: its next full sync makes one."""
    table = reading_table(tables, kb, generation)
    if table is None or not paths:
        return
    replace_paths(table, "path", paths, pa.Table.from_pylist([row.as_dict() for row in rows], schema=reading_schema()))


@store_failures("be written (deleting documents' reading forms)")
def delete(tables: Tables, kb: str, generation: str, paths: Sequence[str]) -> None:
    table = reading_table(tables, kb, generation)
    if table is None or not paths:
        return
    for condition in sql_in_batches("path", list(paths)):
        table.delete(condition)


@store_failures("be read (documents' reading forms)")
def paths(tables: Tables, kb: str, generation: str) -> set[str]:
    table = reading_table(tables, kb, generation)
    return set() if table is None else all_paths(table)


class Rows:
    """Documents' reading rows, each read once per table version while memory allows: every part of a read (a
    cursor followed) read its whole document again."""

    def __init__(self, tables: Tables):
        self._tables = tables
        self.uri = tables.uri  # what a failure names
        # LanceDB's reading rows
        self._kept: BoundedLRU[tuple[str, int, str], dict[str, Any]] = BoundedLRU(_ROWS_KEPT_BYTES, _row_bytes)

    @store_failures("be read (a document's reading form)")
    def of(self, kb: str, generation: str, path: str, at: int | None = None) -> dict[str, Any] | None:  # LanceDB's row
        """A document's reading row (at table version `at`; None: the latest); None when the generation has no
        such document (or no reading table)."""
        table = _search_table(self._tables, kb, generation, at)
        if table is None:
            return None
        version = table.version
        key = (reading_table_name(kb, generation), version, path)
        row = self._kept.get(key)
        if row is None:
            row = fetch_row(table, path)
            if row is not None and table.version == version:  # a sync's commit in between: not kept under `key`
                self._kept.put(key, row)
        return row


def fetch_row(table: LanceTable, path: str) -> dict[str, Any] | None:  # LanceDB's row
    """A document's row as LanceDB hands it over (a table of an older layout lacks later columns)."""
    rows = table.search().where(sql_equals("path", path)).limit(1).to_list()
    return rows[0] if rows else None


def _row_bytes(row: Mapping[str, object]) -> int:
    """About what a row holds in memory: its text, outline and offsets."""
    return sum(sys.getsizeof(value) for value in row.values())


class Listings:
    """What a browse reads: the listing columns of a generation's documents, read once per table version."""

    def __init__(self, tables: Tables):
        self._tables = tables
        self.uri = tables.uri  # what a failure names
        self._kept: BoundedLRU[tuple[str, int], pa.Table] = BoundedLRU(_LISTINGS_KEPT)

    @store_failures("be read (the list of documents)")
    def of(self, kb: str, generation: str, at: int | None = None) -> pa.Table | None:
        """Every document's listing columns (at table version `at`; None: the latest), in path order; None when the
        generation has no reading table."""
        table = _search_table(self._tables, kb, generation, at)
        if table is None:
            return None
        version = table.version
        key = (reading_table_name(kb, generation), version)
        listing = self._kept.get(key)
        if listing is None:
            listing = table.search().select(LISTING_COLUMNS).limit(None).to_arrow().sort_by("path")
            if table.version == version:  # a sync's commit in between: not kept under `key`
                self._kept.put(key, listing)
        return listing


def _search_table(tables: Tables, kb: str, generation: str | None, at: int | None) -> LanceTable | None:
    """The reading table as searches read it (through the read cache, when there is one), at a table version."""
    return None if generation is None else tables.search_table_at(reading_table_name(kb, generation), at)
