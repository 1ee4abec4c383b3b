"""Keeping a generation's tables quick to read: the full-text and scalar indexes its searches and look-ups use,
its vector index (vector_index.py), and compaction once enough small fragments or unindexed rows have piled up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..schema import FIELD_COLUMN, KEYWORD_COLUMN, VECTOR_COLUMN
from .failures import store_failures
from .generations import chunk_table, written_file_table
from .readings import reading_table
from .vector_index import refresh_vector_index

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables

_MAX_SMALL_FRAGMENTS = 16
_MAX_UNINDEXED_ROWS = 2_000
_UNKEPT_VERSIONS_AGE = timedelta(hours=1)
_CLOCK_MARGIN = timedelta(minutes=1)


@store_failures("be written (search indexes)")
def refresh_indexes(  # noqa: PLR0913  # a generation's tables and the refresh settings the store holds
    tables: Tables,
    kb: str,
    generation: str,
    changed: bool,
    vector_min_rows: int,
    keep_since: datetime | None = None,
) -> str:
    """Create missing indexes; after changes, fold new rows in (and add a vector index from `vector_min_rows`);
    compaction keeps every table version written since `keep_since` (the oldest kept version's start). A one-line
    description of the index state."""
    from lancedb.index import FTS, BTree

    table = chunk_table(tables, kb, generation)
    if table is None or table.count_rows() == 0:
        return "empty"
    indexes = {index.columns[0]: index.name for index in table.list_indices()}
    vector_indexes = [index.name for index in table.list_indices() if index.columns == [VECTOR_COLUMN]]
    for column in (KEYWORD_COLUMN, FIELD_COLUMN):
        if column not in indexes and column in table.schema.names:  # tables of layout 1 have no field column
            # Analysis happens in keywords.py; the index only splits on spaces, stems and drops stop words.
            table.create_index(
                column, config=FTS(base_tokenizer="whitespace", with_position=False, max_token_length=64)
            )
    for column in ("id", "path", "content_hash"):  # hit look-ups, filters by file, vector reuse
        if column not in indexes:
            table.create_index(column, config=BTree())
    readings = reading_table(tables, kb, generation)
    if readings is not None and "path" not in {index.columns[0] for index in readings.list_indices()}:
        readings.create_index("path", config=BTree())  # a read looks its document up by path
    if changed:
        compact_when_worth_it(table, unindexed=_unindexed_rows(table, KEYWORD_COLUMN), keep_since=keep_since)
        compact_when_worth_it(written_file_table(tables, kb, generation), unindexed=0, keep_since=keep_since)
        if readings is not None:
            compact_when_worth_it(readings, unindexed=0, keep_since=keep_since)
    kind = refresh_vector_index(table, vector_indexes, vector_min_rows)
    return f"full-text + {kind} vector index" if kind else "full-text + exact vector search"


def compact_when_worth_it(table: LanceTable, unindexed: int, keep_since: datetime | None = None) -> None:
    """Merge small fragments and fold new rows into the indexes, but not after every small edit.

    Each sync commit adds a fragment; hundreds of them make reads slow (0.3 s to read a 10k-row
    manifest), while compacting costs about as much: do it once enough has piled up. Rows not yet
    in the full-text index are still found (by a flat scan), so waiting is safe. Table versions older
    than an hour go then, but none written since `keep_since` (a kept version of the KB reads them).
    """
    # LanceDB declares stats() as a dataclass but returns it as a dict (lancedb 0.40)
    small_fragments = table.stats()["fragment_stats"]["num_small_fragments"]  # type: ignore[index]
    if small_fragments > _MAX_SMALL_FRAGMENTS or unindexed > _MAX_UNINDEXED_ROWS:
        table.optimize(cleanup_older_than=_cleanup_horizon(keep_since))


def _cleanup_horizon(keep_since: datetime | None) -> timedelta:
    """How old a table version must be to go: an hour (a reader still on it has long moved on), or older than
    the oldest kept version, whose table versions were written after its sync started (a minute's margin for
    clocks: LanceDB dates versions by this machine's clock, the record by the one that synced)."""
    if keep_since is None:
        return _UNKEPT_VERSIONS_AGE
    return max(_UNKEPT_VERSIONS_AGE, datetime.now(UTC) - keep_since + _CLOCK_MARGIN)


def _unindexed_rows(table: LanceTable, column: str) -> int:
    """Rows the index on a column (named as LanceDB names it) has not taken in yet; 0 when it has no index."""
    stats = table.index_stats(f"{column}_idx")
    return stats.num_unindexed_rows if stats is not None else 0
