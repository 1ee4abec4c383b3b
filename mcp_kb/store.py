"""LanceDB storage: one chunk table and one file manifest per KB, plus a state table.

The only module that imports lancedb. Writes that replace a document's chunks happen in one
merge_insert commit, so readers see a file's old chunks or its new ones, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import platformdirs
import pyarrow as pa
import pyarrow.compute as pc

from .errors import StoreError

log = logging.getLogger(__name__)

# Below this many rows exact vector search is fast enough; above it HNSW pays off (SciFact, 11k
# chunks: vector p50 20 ms exact vs 7 ms HNSW, nDCG@10 0.686 vs 0.684 after exact re-scoring).
VECTOR_INDEX_MIN_ROWS = 10_000
_MAX_SMALL_FRAGMENTS = 16
_MAX_UNINDEXED_ROWS = 2_000
_ARROW_TYPES = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.string(),  # ISO dates compare correctly as text
    "string[]": pa.list_(pa.string()),
}
_STATE_SCHEMA = pa.schema([("kb", pa.string()), ("state", pa.string())])
_FILE_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("file_hash", pa.string()),
    ("size", pa.int64()),
    ("mtime_ns", pa.int64()),
    ("n_chunks", pa.int32()),
    ("status", pa.string()),  # indexed | failed
    ("reason", pa.string()),
])


def chunk_schema(dimension: int, metadata_types: dict[str, str]) -> pa.Schema:
    """Columns of a KB's chunk table; metadata fields become typed columns usable in filters."""
    fields = [
        ("id", pa.string()),
        ("path", pa.string()),
        ("chunk_index", pa.int32()),
        ("heading", pa.string()),
        ("title", pa.string()),
        ("page", pa.int32()),
        ("line_start", pa.int32()),
        ("line_end", pa.int32()),
        ("text", pa.string()),
        ("search_text", pa.string()),
        ("content_hash", pa.string()),
        ("file_hash", pa.string()),
        ("n_tokens", pa.int32()),
        ("vector", pa.list_(pa.float32(), dimension)),
    ]
    fields += [(name, _ARROW_TYPES[kind]) for name, kind in sorted(metadata_types.items())]
    return pa.schema(fields)


@dataclass(frozen=True)
class FileRecord:
    """A row of the manifest: what the index holds for one source file."""

    path: str
    file_hash: str
    size: int
    mtime_ns: int
    n_chunks: int
    status: str
    reason: str = ""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')` with values quoted safely."""
    return f"{column} IN ({', '.join(_sql_string(v) for v in values)})"


class Store:
    """All tables at one storage location (a folder or a LanceDB URI)."""

    def __init__(self, uri: str):
        self.uri = uri
        import lancedb  # imported here: it takes a second, and a server must answer tools/list before that

        try:
            # interval 0: every read checks for a newer version, so searches see finished syncs.
            self.db = lancedb.connect(uri, read_consistency_interval=timedelta(0))
        except Exception as exc:
            raise StoreError(f"cannot open the index at {uri}: {exc}") from exc
        self._open: dict[str, Any] = {}  # table handles; they follow new versions by themselves

    # ---- tables -------------------------------------------------------------------------
    def _names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    @staticmethod
    def chunk_table_name(kb: str) -> str:
        return f"{kb}__chunks"

    @staticmethod
    def file_table_name(kb: str) -> str:
        return f"{kb}__files"

    def chunk_table(self, kb: str):
        """The KB's chunk table, or None before its first sync."""
        name = self.chunk_table_name(kb)
        if name not in self._open:
            if name not in self._names():
                return None
            self._open[name] = self.db.open_table(name)
        return self._open[name]

    def create_kb_tables(self, kb: str, schema: pa.Schema) -> None:
        """(Re)create a KB's tables empty, dropping any previous ones."""
        self.drop_kb(kb)
        self.db.create_table(self.chunk_table_name(kb), schema=schema)
        self.db.create_table(self.file_table_name(kb), schema=_FILE_SCHEMA)

    def drop_kb(self, kb: str) -> None:
        self._open.clear()
        names = self._names()
        for name in (self.chunk_table_name(kb), self.file_table_name(kb)):
            if name in names:
                self.db.drop_table(name)

    # ---- KB state (model identity, settings, last sync) -----------------------------------
    def read_state(self, kb: str) -> dict[str, Any]:
        if "_state" not in self._names():
            return {}
        rows = self.db.open_table("_state").search().where(f"kb = {_sql_string(kb)}").limit(1).to_list()
        return json.loads(rows[0]["state"]) if rows else {}

    def write_state(self, kb: str, state: dict[str, Any]) -> None:
        row = pa.table({"kb": [kb], "state": [json.dumps(state, ensure_ascii=False)]}, schema=_STATE_SCHEMA)
        if "_state" not in self._names():
            self.db.create_table("_state", schema=_STATE_SCHEMA, exist_ok=True)
        table = self.db.open_table("_state")
        table.merge_insert("kb").when_matched_update_all().when_not_matched_insert_all().execute(row)

    # ---- manifest ------------------------------------------------------------------------
    def read_files(self, kb: str) -> dict[str, FileRecord]:
        name = self.file_table_name(kb)
        if name not in self._names():
            return {}
        rows = self.db.open_table(name).to_arrow().to_pylist()
        return {row["path"]: FileRecord(**row) for row in rows}

    def write_files(self, kb: str, records: Sequence[FileRecord]) -> None:
        if not records:
            return
        data = pa.Table.from_pylist([record.__dict__ for record in records], schema=_FILE_SCHEMA)
        table = self.db.open_table(self.file_table_name(kb))
        table.merge_insert("path").when_matched_update_all().when_not_matched_insert_all().execute(data)

    def delete_files(self, kb: str, paths: Sequence[str]) -> None:
        for batch in _batches(list(paths), 500):
            self.db.open_table(self.file_table_name(kb)).delete(sql_in("path", batch))

    # ---- chunks --------------------------------------------------------------------------
    def replace_documents(self, kb: str, paths: Sequence[str], rows: pa.Table) -> None:
        """Make `rows` the only chunks of `paths`, in one commit (old chunks of those paths go)."""
        table = self.db.open_table(self.chunk_table_name(kb))
        (table.merge_insert("id")
         .when_matched_update_all()
         .when_not_matched_insert_all()
         .when_not_matched_by_source_delete(sql_in("path", paths))
         .execute(rows))

    def delete_documents(self, kb: str, paths: Sequence[str]) -> int:
        table = self.chunk_table(kb)
        if table is None or not paths:
            return 0
        deleted = 0
        for batch in _batches(list(paths), 500):
            condition = sql_in("path", batch)
            deleted += table.count_rows(condition)
            table.delete(condition)
        return deleted

    def indexed_paths(self, kb: str) -> set[str]:
        """Every path that has chunks: the truth when looking for orphans."""
        table = self.chunk_table(kb)
        if table is None:
            return set()
        paths = table.search().select(["path"]).limit(None).to_arrow()["path"]
        return set(pc.unique(paths).to_pylist())

    def vectors_by_content_hash(self, kb: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors for any of these chunk contents, to reuse instead of re-embedding."""
        table = self.chunk_table(kb)
        found: dict[str, list[float]] = {}
        if table is None or not hashes:
            return found
        for batch in _batches(sorted(set(hashes)), 500):
            result = (table.search().where(sql_in("content_hash", batch))
                      .select(["content_hash", "vector"])
                      .limit(None).to_arrow())
            for content_hash, vector in zip(result["content_hash"].to_pylist(), result["vector"].to_pylist()):
                found[content_hash] = vector
        return found

    def count_chunks(self, kb: str) -> int:
        table = self.chunk_table(kb)
        return table.count_rows() if table is not None else 0

    def version(self, kb: str) -> int:
        table = self.chunk_table(kb)
        return table.version if table is not None else 0

    # ---- indexes -------------------------------------------------------------------------
    def refresh_indexes(self, kb: str, changed: bool) -> str:
        """Create missing indexes; after changes, fold new rows in (and add HNSW once the table is large)."""
        from lancedb.index import FTS, BTree, HnswSq

        table = self.chunk_table(kb)
        if table is None or table.count_rows() == 0:
            return "empty"
        indexed = {index.columns[0] for index in table.list_indices()}
        if "search_text" not in indexed:
            # Analysis happens in keywords.py; the index only splits on spaces, stems and drops stop words.
            table.create_index("search_text", config=FTS(base_tokenizer="whitespace", with_position=False,
                                                         max_token_length=64))
        for column in ("id", "path", "content_hash"):  # hit look-ups, filters by file, vector reuse
            if column not in indexed:
                table.create_index(column, config=BTree())
        if changed:
            _compact_when_worth_it(table, unindexed=table.index_stats("search_text_idx").num_unindexed_rows)
            _compact_when_worth_it(self.db.open_table(self.file_table_name(kb)), unindexed=0)
        rows = table.count_rows()
        if rows >= VECTOR_INDEX_MIN_ROWS and "vector" not in indexed:
            table.create_index("vector", config=HnswSq(distance_type="cosine"))
            indexed.add("vector")
        return "full-text + HNSW vector index" if "vector" in indexed else "full-text + exact vector search"


def _compact_when_worth_it(table, unindexed: int) -> None:
    """Merge small fragments and fold new rows into the indexes, but not after every small edit.

    Each sync commit adds a fragment; hundreds of them make reads slow (0.3 s to read a 10k-row
    manifest), while compacting costs about as much: do it once enough has piled up. Rows not yet
    in the full-text index are still found (by a flat scan), so waiting is safe.
    """
    small_fragments = table.stats()["fragment_stats"]["num_small_fragments"]
    if small_fragments > _MAX_SMALL_FRAGMENTS or unindexed > _MAX_UNINDEXED_ROWS:
        table.optimize(cleanup_older_than=timedelta(hours=1))


def local_state_dir(storage: str) -> Path:
    """Where small local files about an index live (sync lock, summaries): the index folder itself,
    or for a remote LanceDB URI a folder in this machine's cache keyed by the URI."""
    if "://" in storage:
        key = hashlib.sha256(storage.encode()).hexdigest()[:16]
        return Path(platformdirs.user_cache_dir("mcp-kb", appauthor=False)) / key
    return Path(storage)


def _summary_path(storage: str, kb: str) -> Path:
    return local_state_dir(storage) / f"{kb}.summary.json"


def write_summary(storage: str, kb: str, summary: dict[str, Any]) -> None:
    """A few counts about a KB, readable without opening LanceDB (servers describe tools with it)."""
    path = _summary_path(storage, kb)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(summary), encoding="utf-8")
    temporary.replace(path)


def read_summary(storage: str, kb: str) -> dict[str, Any]:
    try:
        return json.loads(_summary_path(storage, kb).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _batches(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
