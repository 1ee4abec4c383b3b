"""A storage location's LanceDB connections and open tables: the writer's connection, the one searches read
through (the read cache's, readcache/), a handle kept per table, and the table writes every concern shares."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import StoreError
from ..lru import BoundedLRU
from .compat import import_lancedb
from .failures import store_failures
from .filters import sql_in

if TYPE_CHECKING:
    from lancedb import Session
    from lancedb.db import LanceDBConnection
    from lancedb.table import LanceTable

T = TypeVar("T")

_PINNED_HANDLES_KEPT = 16  # handles checked out at an earlier version (as_of reads); each holds its own metadata


class Tables:
    """All tables at one storage location (a folder or a LanceDB URI), each opened once."""

    def __init__(
        self,
        uri: str,
        options: dict[str, str],
        read_consistency: float,
        read_cache: tuple[Path, int] | None,
        memory_cache_bytes: int | None,
    ):
        self.uri, self.options = uri, options
        self._read_consistency, self._read_cache = read_consistency, read_cache
        # Imported here (compat.py makes it cheaper): a server must answer tools/list before it is.
        lancedb = import_lancedb()

        # One budget for LanceDB's in-memory caches, shared by this store's connections: 4/5 for index pieces
        # (LanceDB's default allows 6 GB), 1/5 for table metadata (default 1 GB).
        self._session: Session | None = (
            None
            if memory_cache_bytes is None
            else lancedb.Session(
                index_cache_size_bytes=memory_cache_bytes * 4 // 5, metadata_cache_size_bytes=memory_cache_bytes // 5
            )
        )
        try:
            self.db = self._connect(options or None)
        except Exception as exc:  # the message may quote the URI, never the options (they hold credentials)
            raise StoreError(f"cannot open the index at {uri}: {exc}") from exc
        self.handles: dict[str, LanceTable] = {}  # they follow new versions by themselves
        self.search_handles: dict[str, LanceTable] = {}  # the same through the read cache (searches only)
        self._pinned_handles: BoundedLRU[tuple[str, int], LanceTable] = BoundedLRU(_PINNED_HANDLES_KEPT)

    def _connect(self, options: dict[str, str] | None) -> LanceDBConnection:
        # How often a read checks for a newer version (0: every read, so searches see finished syncs).
        connection = import_lancedb().connect(
            self.uri,
            read_consistency_interval=timedelta(seconds=self._read_consistency),
            storage_options=options,
            session=self._session,
        )
        return cast("LanceDBConnection", connection)  # what lancedb.connect opens for a folder or object storage

    def names(self) -> set[str]:
        """Every table's name: a listing comes a page at a time (lancedb 0.41: 100 names a page)."""
        names: set[str] = set()
        token = None
        while True:
            page = self.db.list_tables(page_token=token)
            names.update(page.tables)
            token = page.page_token
            if not token:
                return names

    @store_failures("open a table (damaged or missing files?)")
    def table(self, name: str) -> LanceTable | None:
        """An open handle, or None when the table does not exist."""
        if name not in self.handles:
            if name not in self.names():
                return None
            try:
                self.handles[name] = self.db.open_table(name)
            except ValueError:  # listed while another writer is still creating (or dropping) it
                return None
        return self.handles[name]

    @functools.cached_property
    def _search_db(self) -> LanceDBConnection:
        """The connection searches read through: the read cache's when there is one (readcache/)."""
        if self._read_cache is None:
            return self.db
        from .readcache.cache import ReadCache

        cache = ReadCache.for_store(self.uri, self.options, *self._read_cache)
        return self.db if cache is None else self._connect(cache.lancedb_options(self.options))

    @store_failures("open a table (damaged or missing files?)")
    def search_table(self, name: str) -> LanceTable | None:
        """A handle searches read: through the read cache when there is one; None when there is no table."""
        if self._search_db is self.db or self.table(name) is None:
            return self.table(name)
        if name not in self.search_handles:
            self.search_handles[name] = self._search_db.open_table(name)
        return self.search_handles[name]

    @store_failures("open a table as an earlier version left it")
    def search_table_at(self, name: str, version: int | None) -> LanceTable | None:
        """A handle searches read, checked out at a table version (None: the latest, as search_table); None when
        there is no table. An `as_of` read goes through here: each such handle stays at its version."""
        if version is None:
            return self.search_table(name)
        handle = self._pinned_handles.get((name, version))
        if handle is None:
            if self.table(name) is None:
                return None
            handle = self._search_db.open_table(name)
            handle.checkout(version)
            self._pinned_handles.put((name, version), handle)
        return handle

    def held(self) -> set[str]:
        """The tables with an open handle."""
        return set(self.handles) | set(self.search_handles)

    def forget(self, name: str) -> None:
        """Let go of a table's handles (it was dropped, or another process is replacing it)."""
        self.handles.pop(name, None)
        self.search_handles.pop(name, None)

    def drop(self, name: str) -> None:
        self.forget(name)
        self.db.drop_table(name)

    def created(self, name: str, data: pa.Table | None = None, schema: pa.Schema | None = None) -> LanceTable:
        """The table, created first unless it exists (a creation is atomic, with its rows if given)."""
        if self.table(name) is None:
            self._create_once(name, data, schema)
        table = self.table(name)
        if table is None:  # dropped again at once (by hand: mcp-kb never drops these tables)
            raise StoreError(f"the index at {self.uri} could not open the table {name} it created")
        return table

    def _create_once(self, name: str, data: pa.Table | None, schema: pa.Schema | None) -> None:
        """Create a table unless it exists. Of writers racing to create it on object storage, the losers' commits
        conflict (`exist_ok` covers only a table already there when asked): for them, the winner's table is it."""
        try:
            self.db.create_table(name, data=data, schema=schema, exist_ok=True)
        except Exception:
            if name not in self.names():
                raise


def replace_paths(table: LanceTable, key: str, paths: Sequence[str], rows: pa.Table) -> None:
    """Make `rows` the only rows of the documents `paths` in one commit (rows matched by `key`; other rows of those
    paths go). Documents the table has nothing of yet (a first sync, a rebuild) are an append: merge_insert joins
    against the whole table, and writing SciFact's 11k chunks in sync batches grew the writer by 229 MB that way,
    36 MB so."""
    if table.count_rows(sql_in("path", paths)) == 0:
        table.add(rows)
        return
    (
        table.merge_insert(key)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete(sql_in("path", paths))
        .execute(rows)
    )


def all_paths(table: LanceTable) -> set[str]:
    """Every document path a table holds rows of."""
    return set(pc.unique(table.search().select(["path"]).limit(None).to_arrow()["path"]).to_pylist())


class PerKB(Generic[T]):
    """Each KB's rows of one small table (state, versions) as `read` makes them, read again only once the table has
    a new version (a cheap check)."""

    def __init__(self, tables: Tables, name: str, read: Callable[[LanceTable, str], T]):
        self._tables, self._name, self._read = tables, name, read
        self._by_kb: dict[str, tuple[int, T]] = {}  # (table version, rows)

    def of(self, kb: str) -> T | None:
        """The KB's rows, None when the table does not exist yet."""
        table = self._tables.table(self._name)
        if table is None:
            return None
        version = table.version
        cached = self._by_kb.get(kb)
        if cached and cached[0] == version:
            return cached[1]
        rows = self._read(table, kb)
        self._by_kb[kb] = (version, rows)
        return rows


def upsert(table: LanceTable, key: str, rows: pa.Table) -> None:
    """Rows replace those with the same `key` and the rest are added, in one commit."""
    table.merge_insert(key).when_matched_update_all().when_not_matched_insert_all().execute(rows)
