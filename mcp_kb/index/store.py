"""LanceStore, the store contract's backend (contract.py): per KB a chunk table and a file manifest
(one pair per generation) in LanceDB, plus a state table.

The only module that uses lancedb (compat.py imports it). Writes that replace a document's chunks happen in
one merge_insert commit, so readers see a file's old chunks or its new ones, never a mix; a rebuild fills
a new generation and switches to it in one commit of the state row.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..settings import KB_NAME_CHARS, StorageConfig, is_remote_uri, megabytes
from ..errors import KBError, ModelError, StoreError
from ..lru import BoundedLRU
from ..records import KBState
from .compat import import_lancedb
from .contract import Candidate, FileRecord
from .filters import sql_equals, sql_in, sql_lapsed_lease, sql_near
from ..schema import FIELD_COLUMN, HIT_COLUMNS, KEYWORD_COLUMN, VECTOR_COLUMN

log = logging.getLogger(__name__)
_Method = TypeVar("_Method", bound=Callable[..., Any])
_RUST_LOCATION = re.compile(r",?\s*/\S+\.rs:\d+:\d+")  # "…, /root/.cargo/…/object_store.rs:1506:92"

# Below this many rows exact vector search is fast enough; above it HNSW pays off (SciFact, 11k
# chunks: vector p50 20 ms exact vs 7 ms HNSW, nDCG@10 0.686 vs 0.684 after exact re-scoring).
VECTOR_INDEX_MIN_ROWS = 10_000
# IVF partitions of the vector index, one per this many rows when it is built. At 1M chunks
# (benchmarks/shared_index.py million) 64 partitions gave recall@10 0.985 after the exact re-ranking
# of 50 candidates, hybrid p95 47 ms, a 187 s build; LanceDB's default (about sqrt(rows)) 0.951, 43 ms, 342 s.
ROWS_PER_PARTITION = 16_384
# From this many rows the vector index is IVF-PQ (a 384-d vector kept as 48 one-byte codes) rather than HNSW-SQ
# (384 one-byte codes and a graph, about 0.7 kB a row in memory): the smallest index that keeps recall@10 over 0.95,
# since each query re-ranks PQ_REFINE_FACTOR times its candidates by their full vectors, read from disk.
# benchmarks/shared_index.py million: at 1M chunks the figures in docs/performance.md.
PQ_INDEX_MIN_ROWS = 100_000
PQ_REFINE_FACTOR = 10
PQ_DIMENSIONS_PER_CODE = 8
_MAX_SMALL_FRAGMENTS = 16
_MAX_UNINDEXED_ROWS = 2_000
# Bump when the tables' layout changes: the next sync rebuilds each KB (beside the old index) by itself.
# An index with a higher number was written by a newer mcp-kb, and is refused rather than rebuilt over.
LAYOUT_VERSION = 2
_STATE_TABLE = "_state"
_IN_LIST_BATCH = 500  # values in one `IN (...)` predicate (deletes and lookups by path or content hash)
_LEASE_TABLE = "_lease"
# Tables of one generation: `<kb>__chunks__<id>`, `<kb>__files__<id>` (no id: made before generations).
_GENERATION_TABLE = re.compile(rf"^(?P<kb>[{KB_NAME_CHARS}]+?)__(?:chunks|files)(?:__(?P<generation>[0-9a-f]{{12}}))?$")
_STATE_SCHEMA = pa.schema([("kb", pa.string()), ("state", pa.string())])
def _store_failures(what: str) -> Callable[[_Method], _Method]:
    """LanceDB's and the object store's failures, as one StoreError line naming the index and what failed
    (a sync whose final write meets a dropped connection says so, instead of a Rust traceback)."""
    def wrap(method: _Method) -> _Method:
        @functools.wraps(method)
        def run(self: LanceStore, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except KBError:
                raise
            except Exception as exc:
                raise StoreError(f"the index at {self.uri} could not {what}: {_one_line(exc)}") from exc
        return run  # type: ignore[return-value]
    return wrap


def _one_line(exc: BaseException) -> str:
    """An error from LanceDB in one line, without the Rust source location it ends with."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return _RUST_LOCATION.sub("", text)[:400]


# The manifest table's columns are FileRecord's fields (`from __future__` keeps their types as text).
_FILE_SCHEMA = pa.schema([(item.name, pa.int32() if item.name == "n_chunks" else pa.int64() if item.type == "int"
                           else pa.string()) for item in dataclasses.fields(FileRecord)])


class LanceStore:
    """All tables at one storage location (a folder or a LanceDB URI).

    A KB's chunks and manifest live in one *generation* of tables, named by an id that never
    repeats. The KB's state row names the active generation; a rebuild fills a new generation
    beside it and switches by rewriting that one row (one commit), so readers see the old
    version or the new one, never an empty or half-built index. Methods that take
    `generation=None` use the active one.
    """

    layout = LAYOUT_VERSION  # what this store writes; a change rebuilds every KB

    def __init__(self, uri: str, options: dict[str, str] | None = None, read_consistency: float = 0.0,
                 lease_seconds: float = 60.0, read_cache: tuple[Path, int] | None = None,
                 memory_cache_bytes: int | None = None):
        self.uri = uri
        self._options, self._read_consistency, self._read_cache = options or {}, read_consistency, read_cache
        self.lease_seconds = lease_seconds  # a writer's lease on object storage lapses this long after a crash
        # Imported here (compat.py makes it cheaper): a server must answer tools/list before it is.
        lancedb = import_lancedb()

        # One budget for LanceDB's in-memory caches, shared by this store's connections: 4/5 for index pieces
        # (LanceDB's default allows 6 GB), 1/5 for table metadata (default 1 GB).
        self._session = None if memory_cache_bytes is None else lancedb.Session(
            index_cache_size_bytes=memory_cache_bytes * 4 // 5, metadata_cache_size_bytes=memory_cache_bytes // 5)
        try:
            # How often a read checks for a newer version (0: every read, so searches see finished syncs).
            self.db = lancedb.connect(uri, read_consistency_interval=timedelta(seconds=read_consistency),
                                      storage_options=options or None, session=self._session)
        except Exception as exc:  # the message may quote the URI, never the options (they hold credentials)
            raise StoreError(f"cannot open the index at {uri}: {exc}") from exc
        self._open: dict[str, Any] = {}  # table handles; they follow new versions by themselves
        self._search_open: dict[str, Any] = {}  # the same through the read cache (searches only)
        # The refine factor of each table version's vector index (0: none), read once: on object storage listing
        # the indexes is a request.
        self._refine_factors: BoundedLRU[tuple[str, int], int] = BoundedLRU(64)
        self._state_by_kb: dict[str, tuple[int, dict[str, Any]]] = {}  # (state table version, state)

    @classmethod
    def of(cls, storage: StorageConfig) -> LanceStore:
        return cls(storage.uri, storage.lancedb_options(), storage.consistency_seconds, storage.lease_seconds,
                   storage.read_cache(), megabytes(storage.memory_cache_mb))

    @property
    def is_remote(self) -> bool:
        """Whether the index is on object storage (shared by machines) rather than in a folder."""
        return is_remote_uri(self.uri)

    # ---- tables -------------------------------------------------------------------------
    def _names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    @_store_failures("open a table (damaged or missing files?)")
    def _table(self, name: str):
        """An open handle, or None when the table does not exist."""
        if name not in self._open:
            if name not in self._names():
                return None
            try:
                self._open[name] = self.db.open_table(name)
            except ValueError:  # listed while another writer is still creating (or dropping) it
                return None
        return self._open[name]

    @functools.cached_property
    def _search_db(self):
        """The connection searches read through: the read cache's when there is one (readcache/)."""
        if self._read_cache is None:
            return self.db
        import lancedb

        from .readcache.cache import ReadCache

        cache = ReadCache.for_store(self.uri, self._options, *self._read_cache)
        if cache is None:
            return self.db
        return lancedb.connect(self.uri, read_consistency_interval=timedelta(seconds=self._read_consistency),
                               storage_options=cache.lancedb_options(self._options), session=self._session)

    @_store_failures("open a table (damaged or missing files?)")
    def _search_table(self, name: str):
        """A handle searches read: through the read cache when there is one; None when there is no table."""
        if self._search_db is self.db or self._table(name) is None:
            return self._table(name)
        if name not in self._search_open:
            self._search_open[name] = self._search_db.open_table(name)
        return self._search_open[name]

    def active_generation(self, kb: str) -> str | None:
        """The generation searches read, or None before the KB's first sync."""
        return KBState(self.read_state(kb)).generation

    def chunk_table(self, kb: str, generation: str | None = None):
        """The KB's chunk table (of the active generation by default), or None if there is none."""
        generation = self.active_generation(kb) if generation is None else generation
        return None if generation is None else self._table(chunk_table_name(kb, generation))

    def chunk_schema(self, kb: str, generation: str | None = None) -> pa.Schema | None:
        table = self.chunk_table(kb, generation)
        return None if table is None else table.schema

    def _file_table(self, kb: str, generation: str | None):
        generation = self.active_generation(kb) if generation is None else generation
        return None if generation is None else self._table(file_table_name(kb, generation))

    @_store_failures("create a generation's tables")
    def create_generation(self, kb: str, generation: str, schema: pa.Schema) -> None:
        """Empty tables for a generation; tables that already exist (a build being resumed) are kept."""
        self.db.create_table(chunk_table_name(kb, generation), schema=schema, exist_ok=True)
        self.db.create_table(file_table_name(kb, generation), schema=_FILE_SCHEMA, exist_ok=True)

    @_store_failures("drop old tables")
    def _forget_other_generations(self, kb: str, generation: str) -> None:
        """Let go of the handles of the KB's other generations: a sync in another process dropped them (or is
        filling one, which reopens when read), and a server would otherwise keep two per rebuild for its life."""
        for handles in (self._open, self._search_open):
            for name in list(handles):
                match = _GENERATION_TABLE.match(name)
                if match and match["kb"] == kb and (match["generation"] or "") != generation:
                    handles.pop(name, None)

    def drop_generations(self, kb: str, keep: set[str]) -> list[str]:
        """Drop every table generation of the KB except `keep`; returns the dropped generations."""
        dropped = set()
        for name in sorted(self._names()):
            match = _GENERATION_TABLE.match(name)
            if match and match["kb"] == kb and (match["generation"] or "") not in keep:
                self._open.pop(name, None)
                self._search_open.pop(name, None)
                self.db.drop_table(name)
                dropped.add(match["generation"] or "")
        return sorted(dropped)

    # ---- KB state (active generation, model identity, settings, last sync) ----------------
    @_store_failures("be read (a KB's state)")
    def read_state(self, kb: str) -> dict[str, Any]:
        """The KB's state row; cached until the state table gets a new version (a cheap check)."""
        table = self._table(_STATE_TABLE)
        if table is None:
            return {}
        version = table.version
        cached = self._state_by_kb.get(kb)
        if cached and cached[0] == version:
            return cached[1]
        rows = table.search().where(sql_equals("kb", kb)).limit(1).to_list()
        state = json.loads(rows[0]["state"]) if rows else {}
        _refuse_newer_layout(kb, state)
        self._state_by_kb[kb] = (version, state)
        return state

    @_store_failures("be written (a KB's state)")
    def write_state(self, kb: str, state: dict[str, Any]) -> None:
        """Replace the KB's state row in one commit (this is what switches generations)."""
        row = pa.table({"kb": [kb], "state": [json.dumps(state, ensure_ascii=False)]}, schema=_STATE_SCHEMA)
        if self._table(_STATE_TABLE) is None:
            self._create_once(_STATE_TABLE, schema=_STATE_SCHEMA)
        table = self._table(_STATE_TABLE)
        _upsert(table, "kb", row)
        _compact_when_worth_it(table, unindexed=0)  # every sync rewrites the row: keep the table one read

    def read_note(self, kb: str, kind: str) -> dict[str, Any]:
        """A small record about a KB kept beside its state (e.g. the latest health check), or {}."""
        return self.read_state(f"{kb}:{kind}")  # ":" never occurs in a KB name, so keys never meet

    def write_note(self, kb: str, kind: str, note: dict[str, Any]) -> None:
        self.write_state(f"{kb}:{kind}", note)

    # ---- the writer lease (shared storage) --------------------------------------------------
    # One row in its own table: a sync takes it by an update whose condition is that nobody holds it
    # (or the holder's heartbeat is older than the lease). LanceDB commits are atomic (conditional
    # writes on object storage), so of two writers racing for it exactly one update lands.

    @_store_failures("be written (the writer lease)")
    def take_lease(self, holder: dict[str, Any]) -> dict[str, Any] | None:
        """Take the writer lease for `holder` (its "id" must be unique); None when taken, else the live holder."""
        table = self._lease_table()
        current = self.lease_holder()
        if current:  # waiting writers only read: every update is a commit, even one that changes nothing
            return current
        now = time.time()
        values = {"holder": holder["id"], "info": json.dumps(holder), "heartbeat": now, "progress": "{}"}
        try:
            table.update(where=sql_lapsed_lease(now - self.lease_seconds), values=values)
        except Exception as exc:  # a commit conflict with the winner: it holds the lease now
            log.debug("lease update lost a race: %s", exc)
        current = self.lease_holder()
        return None if current and current["id"] == holder["id"] else (current or {"id": "?"})

    @_store_failures("be written (the writer lease)")
    def renew_lease(self, holder_id: str, progress: dict[str, Any]) -> bool:
        """Prove the holder is alive and say how far it is; False when it no longer holds the lease."""
        values = {"heartbeat": time.time(), "progress": json.dumps(progress)}
        return self._lease_table().update(where=sql_equals("holder", holder_id), values=values).rows_updated > 0

    @_store_failures("be written (releasing the writer lease)")
    def release_lease(self, holder_id: str) -> None:
        table = self._lease_table()
        table.update(where=sql_equals("holder", holder_id), values={"holder": "", "info": "{}", "progress": "{}"})
        _compact_when_worth_it(table, unindexed=0)  # each heartbeat rewrote the row

    @_store_failures("be read (the writer lease)")
    def lease_holder(self) -> dict[str, Any] | None:
        """The live holder's description (with its progress), or None when nobody holds the lease."""
        table = self._table(_LEASE_TABLE)
        if table is None:
            return None
        table.checkout_latest()  # a lease is only worth reading fresh
        rows = table.to_arrow().to_pylist()
        live = [r for r in rows if r["holder"] and r["heartbeat"] >= time.time() - self.lease_seconds]
        if not live:
            return None
        return {**json.loads(live[0]["info"]), "progress": json.loads(live[0]["progress"] or "{}")}

    def _lease_table(self):
        if self._table(_LEASE_TABLE) is None:  # created once with its one row (a creation is atomic too)
            self._create_once(_LEASE_TABLE, data=pa.table({"name": ["writer"], "holder": [""], "info": ["{}"],
                                                           "heartbeat": [0.0], "progress": ["{}"]}))
        return self._table(_LEASE_TABLE)

    def _create_once(self, name: str, **contents: Any) -> None:
        """Create a table unless it exists. Of writers racing to create it on object storage, the losers' commits
        conflict (`exist_ok` covers only a table already there when asked): for them, the winner's table is it."""
        try:
            self.db.create_table(name, exist_ok=True, **contents)
        except Exception:
            if name not in self._names():
                raise

    # ---- manifest ------------------------------------------------------------------------
    @_store_failures("be read (a KB's manifest)")
    def read_files(self, kb: str, generation: str | None = None) -> dict[str, FileRecord]:
        table = self._file_table(kb, generation)
        if table is None:
            return {}
        rows = table.to_arrow().to_pylist()
        return {row["path"]: FileRecord(**row) for row in rows}

    @_store_failures("be written (a KB's manifest)")
    def write_files(self, kb: str, generation: str, records: Sequence[FileRecord]) -> None:
        if not records:
            return
        data = pa.Table.from_pylist([record.__dict__ for record in records], schema=_FILE_SCHEMA)
        table = self._file_table(kb, generation)
        _upsert(table, "path", data)

    @_store_failures("be written (a KB's manifest)")
    def delete_files(self, kb: str, generation: str, paths: Sequence[str]) -> None:
        table = self._file_table(kb, generation)
        for batch in _batches(list(paths)):
            table.delete(sql_in("path", batch))

    # ---- chunks --------------------------------------------------------------------------
    def write_chunks(self, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
        """One commit: each document's old chunks out, its rows in; a document whose values do not fit their
        columns is left out (its old chunks go too), with the reason by path."""
        if not rows_by_path:
            return {}
        rows, refused = self.chunk_rows(kb, generation, rows_by_path)
        self.replace_documents(kb, generation, list(rows_by_path), rows)
        return refused

    def chunk_rows(self, kb: str, generation: str,
                   rows_by_path: Mapping[str, list[dict[str, Any]]]) -> tuple[pa.Table, dict[str, str]]:
        """The documents' rows as one table of the generation's schema; a document whose values do not fit their
        columns is left out, with the reason by path."""
        schema = self._written_chunk_table(kb, generation).schema
        tables, refused = [], {}
        for path, document_rows in rows_by_path.items():
            try:
                tables.append(pa.Table.from_pylist(document_rows, schema=schema))
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                refused[path] = f"cannot store its chunks: {exc}"
        return (pa.concat_tables(tables) if tables else schema.empty_table()), refused

    # ---- a cluster's writes (index/fragments.py): rows written by workers, made visible by one commit ------
    @_store_failures("be written (chunk fragments)")
    def write_fragments(self, kb: str, generation: str, rows: pa.Table) -> bytes:
        """Write rows of the generation's chunk table without committing them: what `commit_fragments` takes."""
        from .fragments import write_uncommitted

        return write_uncommitted(self._dataset_uri(kb, generation), self._options, rows)

    @_store_failures("be written (a wave of chunk fragments)")
    def commit_fragments(self, kb: str, generation: str, paths: Sequence[str], written: Sequence[bytes]) -> None:
        """One commit: the old chunks of `paths` out, the written fragments in."""
        from .fragments import commit_wave

        commit_wave(self._dataset_uri(kb, generation), self._options, paths, written)
        self.chunk_table(kb, generation).checkout_latest()  # this handle reads what was just committed

    def _dataset_uri(self, kb: str, generation: str) -> str:
        return str(self._written_chunk_table(kb, generation).uri)

    def _written_chunk_table(self, kb: str, generation: str):
        """The chunk table a sync writes into: it made it, so none is an error (another process dropped it)."""
        table = self.chunk_table(kb, generation)
        if table is None:
            raise StoreError(f"knowledge base {kb!r}: generation {generation} has no chunk table; sync again")
        return table

    @_store_failures("be written (chunks)")
    def replace_documents(self, kb: str, generation: str, paths: Sequence[str], rows: pa.Table) -> None:
        """Make `rows` the only chunks of `paths`, in one commit (old chunks of those paths go)."""
        table = self.chunk_table(kb, generation)
        if table.count_rows(sql_in("path", paths)) == 0:
            # New documents (a first sync, a rebuild): an append. merge_insert joins against the whole
            # table: writing SciFact's 11k chunks in sync batches grew the writer by 229 MB that way, 36 MB so.
            table.add(rows)
            return
        (table.merge_insert("id")
         .when_matched_update_all()
         .when_not_matched_insert_all()
         .when_not_matched_by_source_delete(sql_in("path", paths))
         .execute(rows))

    @_store_failures("be written (deleting chunks)")
    def delete_documents(self, kb: str, generation: str, paths: Sequence[str]) -> int:
        table = self.chunk_table(kb, generation)
        if table is None or not paths:
            return 0
        deleted = 0
        for batch in _batches(list(paths)):
            condition = sql_in("path", batch)
            deleted += table.count_rows(condition)
            table.delete(condition)
        return deleted

    @_store_failures("be read (chunk paths)")
    def indexed_paths(self, kb: str, generation: str) -> set[str]:
        """Every path that has chunks: the truth when looking for orphans."""
        table = self.chunk_table(kb, generation)
        if table is None:
            return set()
        paths = table.search().select(["path"]).limit(None).to_arrow()["path"]
        return set(pc.unique(paths).to_pylist())

    @_store_failures("be read (stored vectors)")
    def vectors_by_content_hash(self, kb: str, generation: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors for any of these chunk contents, to reuse instead of re-embedding."""
        table = self.chunk_table(kb, generation)
        found: dict[str, list[float]] = {}
        if table is None or not hashes:
            return found
        for batch in _batches(sorted(set(hashes))):
            result = (table.search().where(sql_in("content_hash", batch))
                      .select(["content_hash", VECTOR_COLUMN])
                      .limit(None).to_arrow())
            for content_hash, vector in zip(result["content_hash"].to_pylist(), result[VECTOR_COLUMN].to_pylist()):
                found[content_hash] = vector
        return found

    @_store_failures("be read (chunk count)")
    def count_chunks(self, kb: str, generation: str | None = None) -> int:
        table = self.chunk_table(kb, generation)
        return table.count_rows() if table is not None else 0

    @_store_failures("be read (table version)")
    def version(self, kb: str) -> int:
        table = self.chunk_table(kb)
        return table.version if table is not None else 0

    def view(self, kb: str, generation: str) -> LanceChunkView | None:
        """Read queries on a generation's chunks (through the read cache), or None when its table does not exist."""
        name = chunk_table_name(kb, generation)
        self._forget_other_generations(kb, generation)
        table = self._search_table(name)
        if table is None:
            return None
        version = table.version
        refine_factor = self._refine_factors.get((name, version))
        if refine_factor is None:
            refine_factor = _refine_factor(table)
            self._refine_factors.put((name, version), refine_factor)
        return LanceChunkView(table, generation, version, refine_factor)

    @_store_failures("be read (document titles)")
    def document_titles(self, kb: str, generation: str, limit: int) -> list[str]:
        """Up to `limit` distinct document titles (from first chunks), sorted so the text is stable. Read through
        the writer's own handle, which has seen its last commit (the read cache's lags by read_consistency)."""
        table = self.chunk_table(kb, generation)
        if table is None:
            return []
        rows = table.search().where(sql_equals("chunk_index", 0)).select(["title"]).limit(limit * 4).to_list()
        return sorted({row["title"] for row in rows if row["title"]})[:limit]

    # ---- indexes -------------------------------------------------------------------------
    @_store_failures("be written (search indexes)")
    def refresh_indexes(self, kb: str, generation: str, changed: bool) -> str:
        """Create missing indexes; after changes, fold new rows in (and add HNSW once the table is large)."""
        from lancedb.index import FTS, BTree

        table = self.chunk_table(kb, generation)
        if table is None or table.count_rows() == 0:
            return "empty"
        indexes = {index.columns[0]: index.name for index in table.list_indices()}
        vector_indexes = [index.name for index in table.list_indices() if index.columns == [VECTOR_COLUMN]]
        for column in (KEYWORD_COLUMN, FIELD_COLUMN):
            if column not in indexes and column in table.schema.names:  # tables of layout 1 have no field column
                # Analysis happens in keywords.py; the index only splits on spaces, stems and drops stop words.
                table.create_index(column, config=FTS(base_tokenizer="whitespace", with_position=False,
                                                      max_token_length=64))
        for column in ("id", "path", "content_hash"):  # hit look-ups, filters by file, vector reuse
            if column not in indexes:
                table.create_index(column, config=BTree())
        if changed:
            _compact_when_worth_it(table, unindexed=table.index_stats(_index_name(KEYWORD_COLUMN)).num_unindexed_rows)
            _compact_when_worth_it(self._file_table(kb, generation), unindexed=0)
        kind = _refresh_vector_index(table, vector_indexes)
        return f"full-text + {kind} vector index" if kind else "full-text + exact vector search"


def _refresh_vector_index(table, names: list[str]) -> str:
    """Build the vector index once the table is large enough, and again when it has grown 4× past the
    partitions it was built with (a KB grown by syncs from 10k to 1M chunks would keep 1 partition) or past
    PQ_INDEX_MIN_ROWS. Its name says its kind and partitions (`vector_p64`, `vector_pq_p64`); returns the kind
    the table has, or "" for none."""
    current = _newest_vector_index(table, names)
    rows = table.count_rows()
    wanted = VectorIndex.for_rows(rows, table.schema.field(VECTOR_COLUMN).type.list_size)
    built = VectorIndex.named(current)
    # Only growth rebuilds (a KB shrinking past a threshold keeps its index: no rebuilds back and forth at 100k).
    if current and not (built and ((wanted.pq and not built.pq) or wanted.partitions >= 4 * built.partitions)):
        return built.kind if built else "HNSW"  # an index of an older version, whose partitions are not known
    if rows < VECTOR_INDEX_MIN_ROWS:
        return ""
    # Searches go on with the old index while the new one builds; it is dropped once the new one is in.
    table.create_index(VECTOR_COLUMN, config=wanted.config(), name=wanted.name)
    if current:
        table.drop_index(current)
    return wanted.kind


@dataclasses.dataclass(frozen=True)
class VectorIndex:
    """The vector index a table of some size gets: its kind, its IVF partitions, and how it is searched."""

    pq: bool  # IVF-PQ; else IVF-HNSW-SQ
    partitions: int
    sub_vectors: int = 0  # of IVF-PQ

    @classmethod
    def for_rows(cls, rows: int, dimension: int) -> VectorIndex:
        partitions = max(1, rows // ROWS_PER_PARTITION)
        if rows < PQ_INDEX_MIN_ROWS:
            return cls(False, partitions)
        # LanceDB wants sub-vectors of equal length: the most codes of at least PQ_DIMENSIONS_PER_CODE dimensions
        codes = next(n for n in range(max(1, dimension // PQ_DIMENSIONS_PER_CODE), 0, -1) if dimension % n == 0)
        return cls(True, partitions, codes)

    @classmethod
    def named(cls, name: str | None) -> VectorIndex | None:
        """The index a name of ours describes (its sub-vectors are not in it), or None: not ours."""
        match = re.fullmatch(r"vector_(pq_)?p(\d+)", name or "")
        return cls(bool(match[1]), int(match[2])) if match else None

    @property
    def name(self) -> str:
        return f"vector_{'pq_' if self.pq else ''}p{self.partitions}"

    @property
    def kind(self) -> str:
        return "IVF-PQ" if self.pq else "HNSW"

    @property
    def refine_factor(self) -> int:
        """How many times the asked-for candidates the index hands over to be re-ranked by their full vectors
        (0: none; HNSW-SQ's candidates are close enough for the exact re-scoring in LanceChunkView.nearest)."""
        return PQ_REFINE_FACTOR if self.pq else 0

    def config(self) -> Any:
        from lancedb.index import HnswSq, IvfPq

        if self.pq:
            return IvfPq(distance_type="cosine", num_partitions=self.partitions, num_sub_vectors=self.sub_vectors)
        return HnswSq(distance_type="cosine", num_partitions=self.partitions)


def _refine_factor(table) -> int:
    """How the table's vector index is searched: the refine factor of its kind (0: none, or not refined)."""
    kinds = [VectorIndex.named(index.name) for index in table.list_indices() if index.columns == [VECTOR_COLUMN]]
    return max((kind.refine_factor for kind in kinds if kind), default=0)


def _newest_vector_index(table, names: list[str]) -> str | None:
    """The vector index with the most partitions; others (a rebuild cut short before it dropped the
    old one) are dropped."""
    if not names:
        return None
    newest = max(names, key=lambda name: (getattr(VectorIndex.named(name), "partitions", 0), name))
    for name in names:
        if name != newest:
            table.drop_index(name)
    return newest


class LanceChunkView:
    """Read queries on one generation of a KB's chunks. Callers get plain candidates and rows;
    LanceDB's queries, its `_distance`/`_score`/`_rowid` columns and their quirks stay here."""

    def __init__(self, table, generation: str, version: int, refine_factor: int = 0):
        self._table = table
        self.generation = generation
        self._version = version  # read once per view: with read_consistency 0 each read looks for a newer one
        self._refine_factor = refine_factor  # of its vector index; 0: none, or not refined

    @property
    def version(self) -> int:
        return self._version

    def nearest(self, vector: np.ndarray, where: str | None, depth: int) -> list[Candidate]:
        """Nearest chunks scored by the exact cosine of query and chunk vectors.

        LanceDB's `_distance` is the cosine distance without an index but twice that (squared L2
        of normalized, quantized vectors) with the HNSW-SQ index, so it is recomputed here: scores
        mean the same at any table size, and the candidates are re-ranked exactly. An index searched
        with a refine factor (IVF-PQ) has re-ranked them by their full vectors already: its distances
        are the exact cosine distances, and the vectors are not read again (2 ms of 14 at 1M chunks).
        """
        stored = self._table.schema.field(VECTOR_COLUMN).type.list_size
        if len(vector) != stored:  # the model (or a service behind the same name) changed since the last sync
            raise ModelError(f"the query vector has {len(vector)} dimensions but this index holds {stored}-dimensional "
                             f"ones; the next sync rebuilds the index for the model now configured")
        search = self._table.search(vector, vector_column_name=VECTOR_COLUMN).distance_type("cosine")
        if self._refine_factor:
            search = search.refine_factor(self._refine_factor)
        if where:
            search = search.where(where, prefilter=True)
        columns = ["id", "_distance"] if self._refine_factor else ["id", VECTOR_COLUMN, "_distance"]
        rows = search.select(columns).with_row_id(True).limit(depth).to_arrow()
        if rows.num_rows == 0:
            return []
        if self._refine_factor:
            similarities = (1.0 - np.asarray(rows["_distance"], dtype=np.float64)).tolist()
        else:
            vectors = np.asarray(rows[VECTOR_COLUMN].to_pylist(), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(vector) + 1e-12
            similarities = (vectors @ vector / norms).tolist()
        found = sorted(zip(rows["id"].to_pylist(), similarities, rows["_rowid"].to_pylist()),
                       key=lambda item: item[1], reverse=True)
        return [Candidate(chunk, score, row_id, vector_rank=rank)
                for rank, (chunk, score, row_id) in enumerate(found, start=1)]

    def keyword(self, terms: str, where: str | None, depth: int, field_weight: float = 0.0) -> list[Candidate]:
        """BM25 matches of analysed terms (keywords.py). A table whose full-text index is not built yet is
        searched by a flat scan (LanceDB does that itself), so every failure here is a real one and raises.

        With a field weight, a chunk's BM25 in its title and heading path is added, times the weight.
        Added, not LanceDB's MultiMatchQuery: that takes the best column's score, so a weight below 1
        changed nothing and a match in both counted no more than in one."""
        found = self._matches(KEYWORD_COLUMN, terms, where, depth)
        if field_weight and FIELD_COLUMN in self._table.schema.names:
            for chunk, (score, row_id) in self._matches(FIELD_COLUMN, terms, where, depth).items():
                body_score, body_row = found.get(chunk, (0.0, row_id))
                found[chunk] = (body_score + field_weight * score, body_row)
        # a stable sort: ties keep BM25's order
        ranked = sorted(found.items(), key=lambda item: item[1][0], reverse=True)[:depth]
        return [Candidate(chunk, score, row_id, keyword_rank=rank)
                for rank, (chunk, (score, row_id)) in enumerate(ranked, start=1)]

    def _matches(self, column: str, terms: str, where: str | None, depth: int) -> dict[str, tuple[float, int]]:
        """BM25 of the best `depth` chunks in one full-text column: id -> (score, row id)."""
        search = self._table.search(terms, query_type="fts", fts_columns=column)
        if where:
            search = search.where(where, prefilter=True)
        rows = search.select(["id", "_score"]).with_row_id(True).limit(depth).to_arrow()
        return {chunk: (score, row_id) for chunk, score, row_id in
                zip(rows["id"].to_pylist(), rows["_score"].to_pylist(), rows["_rowid"].to_pylist())}

    def rows(self, candidates: list[Candidate]) -> dict[str, dict[str, Any]]:
        """The hit columns of these candidates by id, read by row address.

        Reading the fields of the few winners afterwards is cheaper than reading them for every
        candidate of both sides (hybrid p50 at 100k chunks 33 ms vs 41 ms). A row a sync rewrote in
        between no longer matches its id and is left out.
        """
        if not candidates:
            return {}
        try:
            rows = self._table.take_row_ids([c.row_id for c in candidates]).select(HIT_COLUMNS).to_list()
        except Exception:  # addresses moved (a compaction ran in between): look the ids up instead
            rows = self._scan(sql_in("id", [c.id for c in candidates]), HIT_COLUMNS)
        return {row["id"]: row for row in rows}

    def scan(self, where: str) -> list[dict[str, Any]]:
        """Every chunk matching a predicate, in document order."""
        rows = self._scan(where, HIT_COLUMNS)
        return sorted(rows, key=lambda row: (row["path"], row["chunk_index"]))

    def neighbours(self, spots: list[tuple[str, int]], n: int) -> dict[tuple[str, int], str]:
        """Text of the chunks within `n` positions of each (path, chunk_index)."""
        rows = self._scan(sql_near(spots, n), ["path", "chunk_index", "text"])
        return {(row["path"], row["chunk_index"]): row["text"] for row in rows}

    def sample(self, n: int, seed: int) -> list[dict[str, Any]]:
        """Up to `n` chunks drawn at random (the same ones for the same seed and table)."""
        total = self._table.count_rows()
        offsets = sorted(random.Random(seed).sample(range(total), min(n, total)))
        return self._table.take_offsets(offsets).select(HIT_COLUMNS).to_list() if offsets else []

    def _scan(self, where: str, columns: list[str]) -> list[dict[str, Any]]:
        return self._table.search().where(where).select(columns).limit(None).to_list()


def _refuse_newer_layout(kb: str, state: dict[str, Any]) -> None:
    """Only older layouts are migrated (by a rebuild): rebuilding over a newer one would drop its data."""
    layout = state.get("layout")
    if isinstance(layout, int) and layout > LAYOUT_VERSION:
        raise StoreError(f"knowledge base {kb!r}: this index was written by a newer mcp-kb (layout {layout}; this "
                         f"version reads layout {LAYOUT_VERSION} and older); upgrade mcp-kb, or point storage "
                         f"elsewhere. Nothing was changed.")


def chunk_table_name(kb: str, generation: str) -> str:
    return f"{kb}__chunks__{generation}" if generation else f"{kb}__chunks"


def file_table_name(kb: str, generation: str) -> str:
    return f"{kb}__files__{generation}" if generation else f"{kb}__files"


def _compact_when_worth_it(table, unindexed: int) -> None:
    """Merge small fragments and fold new rows into the indexes, but not after every small edit.

    Each sync commit adds a fragment; hundreds of them make reads slow (0.3 s to read a 10k-row
    manifest), while compacting costs about as much: do it once enough has piled up. Rows not yet
    in the full-text index are still found (by a flat scan), so waiting is safe.
    """
    small_fragments = table.stats()["fragment_stats"]["num_small_fragments"]
    if small_fragments > _MAX_SMALL_FRAGMENTS or unindexed > _MAX_UNINDEXED_ROWS:
        table.optimize(cleanup_older_than=timedelta(hours=1))


def _index_name(column: str) -> str:
    """What LanceDB names the index it builds on a column."""
    return f"{column}_idx"


def _upsert(table: Any, key: str, rows: pa.Table) -> None:
    """Rows replace those with the same `key` and the rest are added, in one commit."""
    table.merge_insert(key).when_matched_update_all().when_not_matched_insert_all().execute(rows)


def _batches(items: list[Any], size: int = _IN_LIST_BATCH) -> Iterable[list[Any]]:
    """Items in runs short enough for one `IN (...)` predicate each."""
    for start in range(0, len(items), size):
        yield items[start:start + size]
