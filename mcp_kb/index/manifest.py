"""A generation's manifest: one row per source document (a FileRecord: its hash, size, chunks and status), what
a sync compares the sources against."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..lru import BoundedLRU

from .connection import upsert
from .contract import FileRecord
from .failures import store_failures
from .filters import sql_in_batches
from .generations import FILE_SCHEMA, file_table, file_table_name, written_file_table

if TYPE_CHECKING:
    from .connection import Tables

_FINGERPRINTS_KEPT = 8  # manifests of (table, version) kept in memory for freshness


@store_failures("be read (a KB's manifest)")
def read_files(tables: Tables, kb: str, generation: str | None, at: int | None = None) -> dict[str, FileRecord]:
    """The manifest (as table version `at` left it; None: now)."""
    table = (
        file_table(tables, kb, generation)
        if at is None or generation is None
        else tables.search_table_at(file_table_name(kb, generation), at)
    )
    if table is None:
        return {}
    rows = table.to_arrow().to_pylist()
    return {row["path"]: FileRecord(**row) for row in rows}


class Fingerprints:
    """What an answer's freshness reads of a manifest: each document's source fingerprint (size, mtime_ns), the
    manifest's columns read once per table version (a query per answer took 4 ms of a 15 ms search)."""

    def __init__(self, tables: Tables):
        self._tables = tables
        self.uri = tables.uri  # what a failure names
        self._kept: BoundedLRU[tuple[str, int], pa.Table] = BoundedLRU(_FINGERPRINTS_KEPT)

    @store_failures("be read (a KB's manifest)")
    def of(self, kb: str, generation: str, paths: Collection[str]) -> dict[str, tuple[int, int]]:
        """The fingerprints the current manifest of a generation holds for these documents (those it has)."""
        name = file_table_name(kb, generation)
        table = self._tables.search_table(name)
        if table is None or not paths:
            return {}
        version = table.version
        kept = self._kept.get((name, version))
        if kept is None:
            kept = table.search().select(["path", "size", "mtime_ns"]).limit(None).to_arrow()
            if table.version == version:  # a sync's commit in between: not kept under this version
                self._kept.put((name, version), kept)
        rows = kept.filter(pc.is_in(kept["path"], pa.array(list(paths), pa.string()))).to_pylist()
        return {row["path"]: (row["size"], row["mtime_ns"]) for row in rows}


@store_failures("be written (a KB's manifest)")
def write_files(tables: Tables, kb: str, generation: str, records: Sequence[FileRecord]) -> None:
    if not records:
        return
    data = pa.Table.from_pylist([record.__dict__ for record in records], schema=FILE_SCHEMA)
    upsert(written_file_table(tables, kb, generation), "path", data)


@store_failures("be written (a KB's manifest)")
def delete_files(tables: Tables, kb: str, generation: str, paths: Sequence[str]) -> None:
    if not paths:
        return
    table = written_file_table(tables, kb, generation)
    for condition in sql_in_batches("path", list(paths)):
        table.delete(condition)
