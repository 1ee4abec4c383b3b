"""A generation's chunk table as a sync writes it (each document's chunks replaced in one commit, so readers see
a file's old chunks or its new ones, never a mix) and the look-ups a sync makes in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..schema import VECTOR_COLUMN
from .connection import all_paths, replace_paths
from .failures import store_failures
from .filters import sql_equals, sql_in_batches
from .generations import chunk_table, written_chunk_table

if TYPE_CHECKING:
    from .connection import Tables


def chunk_rows(
    tables: Tables, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, object]]]
) -> tuple[pa.Table, dict[str, str]]:
    """The documents' rows as one table of the generation's schema; a document whose values do not fit their
    columns is left out, with the reason by path."""
    schema = written_chunk_table(tables, kb, generation).schema
    parts, refused = [], {}
    for path, document_rows in rows_by_path.items():
        try:
            parts.append(pa.Table.from_pylist(document_rows, schema=schema))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            refused[path] = f"cannot store its chunks: {exc}"
    return (pa.concat_tables(parts) if parts else schema.empty_table()), refused


@store_failures("be written (chunks)")
def replace_documents(tables: Tables, kb: str, generation: str, paths: Sequence[str], rows: pa.Table) -> None:
    """Make `rows` the only chunks of `paths`, in one commit (old chunks of those paths go)."""
    replace_paths(written_chunk_table(tables, kb, generation), "id", paths, rows)


@store_failures("be written (deleting chunks)")
def delete_documents(tables: Tables, kb: str, generation: str, paths: Sequence[str]) -> int:
    table = chunk_table(tables, kb, generation)
    if table is None or not paths:
        return 0
    deleted = 0
    for condition in sql_in_batches("path", list(paths)):
        deleted += table.count_rows(condition)
        table.delete(condition)
    return deleted


@store_failures("be read (chunk paths)")
def indexed_paths(tables: Tables, kb: str, generation: str) -> set[str]:
    """Every path that has chunks: the truth when looking for orphans."""
    table = chunk_table(tables, kb, generation)
    return set() if table is None else all_paths(table)


@store_failures("be read (stored vectors)")
def vectors_by_content_hash(tables: Tables, kb: str, generation: str, hashes: Sequence[str]) -> dict[str, list[float]]:
    """Stored vectors for any of these chunk contents, to reuse instead of re-embedding."""
    table = chunk_table(tables, kb, generation)
    found: dict[str, list[float]] = {}
    if table is None or not hashes:
        return found
    for condition in sql_in_batches("content_hash", sorted(set(hashes))):
        result = table.search().where(condition).select(["content_hash", VECTOR_COLUMN]).limit(None).to_arrow()
        for content_hash, vector in zip(result["content_hash"].to_pylist(), result[VECTOR_COLUMN].to_pylist()):
            found[content_hash] = vector
    return found


@store_failures("be read (chunk count)")
def count_chunks(tables: Tables, kb: str, generation: str | None) -> int:
    table = chunk_table(tables, kb, generation)
    return table.count_rows() if table is not None else 0


@store_failures("be read (table version)")
def version(tables: Tables, kb: str, generation: str | None) -> int:
    table = chunk_table(tables, kb, generation)
    return table.version if table is not None else 0


@store_failures("be read (document titles)")
def document_titles(tables: Tables, kb: str, generation: str, limit: int) -> list[str]:
    """Up to `limit` distinct document titles (from first chunks), sorted so the text is stable. Read through
    the writer's own handle, which has seen its last commit (the read cache's lags by read_consistency)."""
    table = chunk_table(tables, kb, generation)
    if table is None:
        return []
    rows = table.search().where(sql_equals("chunk_index", 0)).select(["title"]).limit(limit * 4).to_list()
    return sorted({row["title"] for row in rows if row["title"]})[:limit]
