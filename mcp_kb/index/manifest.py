"""A generation's manifest: one row per source document (a FileRecord: its hash, size, chunks and status), what
a sync compares the sources against."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from .connection import upsert
from .contract import FileRecord
from .failures import store_failures
from .filters import sql_in_batches
from .generations import FILE_SCHEMA, file_table, file_table_name, written_file_table

if TYPE_CHECKING:
    from .connection import Tables


@store_failures("be read (a KB's manifest)")
def read_files(tables: Tables, kb: str, generation: str | None, at: int | None = None,
               paths: Collection[str] | None = None) -> dict[str, FileRecord]:
    """The manifest (as table version `at` left it; None: now); with `paths`, those documents' records alone."""
    table = file_table(tables, kb, generation) if at is None or generation is None else \
        tables.search_table_at(file_table_name(kb, generation), at)
    if table is None or (paths is not None and not paths):
        return {}
    if paths is None:
        rows = table.to_arrow().to_pylist()
    else:
        rows = [row for condition in sql_in_batches("path", list(paths))
                for row in table.search().where(condition).limit(None).to_arrow().to_pylist()]
    return {row["path"]: FileRecord(**row) for row in rows}


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
