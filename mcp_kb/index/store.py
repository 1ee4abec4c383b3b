"""LanceStore, the store contract's backend (contract.py): per KB a chunk table and a file manifest (one pair per
generation) in LanceDB, plus a state table. The class the rest of mcp-kb opens; it composes the concerns:

connection.py (the connection and open tables), generations.py, state_table.py (KB state and notes), lease.py (the
writer lease), manifest.py, chunks.py (a sync's writes and look-ups), readings.py (documents' reading forms), fragments.py (a cluster's writes), upkeep.py
and vector_index.py (indexes and compaction), views.py (what searches read); failures.py words their errors.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

# The concern modules by name; absolute, since `from . import` names the package, whose open_store imports this.
import mcp_kb.index.chunks as chunks
import mcp_kb.index.fragments as fragments
import mcp_kb.index.generations as generations
import mcp_kb.index.lease as lease
import mcp_kb.index.manifest as manifest
import mcp_kb.index.readings as readings
import mcp_kb.index.upkeep as upkeep
import mcp_kb.index.versions as versions

from ..records import HealthCheck, KBState, KBSummary, KBVersion, Pinned, SyncProgress
from ..schema import ReadingRow
from ..settings import StorageConfig, is_remote_uri, megabytes
from .connection import Tables
from .contract import FileRecord, Note, SyncHolder
from .state_table import LAYOUT_VERSION, StateTable
from .vector_index import VectorIndex as VectorIndex  # benchmarks/shared_index.py sizes its variants by it
from .views import LanceChunkView, Views

if TYPE_CHECKING:
    from lancedb.db import LanceDBConnection
    from lancedb.table import LanceTable

# Below this many rows exact vector search is fast enough; above it HNSW pays off (SciFact, 11k
# chunks: vector p50 20 ms exact vs 7 ms HNSW, nDCG@10 0.686 vs 0.684 after exact re-scoring). Read at each
# refresh_indexes, so a test lowers it here; the index's other sizes are vector_index.py's.
VECTOR_INDEX_MIN_ROWS = 10_000


class LanceStore:
    """All tables at one storage location (a folder or a LanceDB URI).

    A KB's chunks and manifest live in one *generation* of tables (generations.py); its state row names the
    active one. Methods that take `generation=None` use the active one.
    """

    layout = LAYOUT_VERSION  # what this store writes; a change rebuilds every KB

    def __init__(  # noqa: PLR0913  # one per storage setting
        self,
        uri: str,
        options: dict[str, str] | None = None,
        read_consistency: float = 0.0,
        lease_seconds: float = 60.0,
        read_cache: tuple[Path, int] | None = None,
        memory_cache_bytes: int | None = None,
    ):
        self.uri = uri
        self.lease_seconds = lease_seconds  # a writer's lease on object storage lapses this long after a crash
        self._tables = Tables(uri, options or {}, read_consistency, read_cache, memory_cache_bytes)
        self._states = StateTable(self._tables)
        self._views = Views(self._tables)
        self._listings = readings.Listings(self._tables)
        self._fingerprints = manifest.Fingerprints(self._tables)
        self._rows = readings.Rows(self._tables)
        self._versions = versions.VersionTable(self._tables)

    @classmethod
    def of(cls, storage: StorageConfig) -> LanceStore:
        return cls(
            storage.uri,
            storage.lancedb_options(),
            storage.consistency_seconds,
            storage.lease_seconds,
            storage.read_cache(),
            megabytes(storage.memory_cache_mb),
        )

    @property
    def db(self) -> LanceDBConnection:
        """LanceDB's connection (to list the tables)."""
        return self._tables.db

    @property
    def is_remote(self) -> bool:
        """Whether the index is on object storage (shared by machines) rather than in a folder."""
        return is_remote_uri(self.uri)

    # ---- generations -----------------------------------------------------------------------
    def active_generation(self, kb: str) -> str | None:
        """The generation searches read, or None before the KB's first sync."""
        return self.read_state(kb).generation

    def _generation(self, kb: str, generation: str | None) -> str | None:
        return self.active_generation(kb) if generation is None else generation

    def chunk_table(self, kb: str, generation: str | None = None) -> LanceTable | None:
        """The KB's chunk table (of the active generation by default), or None if there is none."""
        return generations.chunk_table(self._tables, kb, self._generation(kb, generation))

    def chunk_schema(self, kb: str, generation: str | None = None) -> pa.Schema | None:
        table = self.chunk_table(kb, generation)
        return None if table is None else table.schema

    def create_generation(self, kb: str, generation: str, schema: pa.Schema) -> None:
        generations.create(self._tables, kb, generation, schema)

    def drop_generations(self, kb: str, keep: set[str]) -> list[str]:
        """Drop the KB's generations but `keep` and those a recorded version pins."""
        return generations.drop_all_but(self._tables, kb, keep | self._versions.generations(kb))

    # ---- KB state (active generation, model identity, settings, last sync) ----------------
    def read_state(self, kb: str) -> KBState:
        return self._states.state(kb)

    def write_state(self, kb: str, state: KBState) -> None:
        """Replace the KB's state row in one commit (this is what switches generations)."""
        self._states.write(kb, state.as_dict())

    def read_note(self, kb: str, kind: type[Note]) -> Note | None:
        """A small record about a KB kept beside its state (e.g. the latest health check), None when none is."""
        return self._states.note(kb, kind)

    def write_note(self, kb: str, note: KBSummary | HealthCheck) -> None:
        self._states.write_note(kb, note)

    # ---- the writer lease (shared storage) --------------------------------------------------
    def take_lease(self, holder: SyncHolder) -> SyncHolder | None:
        return lease.take(self._tables, holder, self.lease_seconds)

    def renew_lease(self, holder_id: str, progress: Mapping[str, SyncProgress]) -> bool:
        return lease.renew(self._tables, holder_id, progress)

    def release_lease(self, holder_id: str) -> None:
        lease.release(self._tables, holder_id)

    def lease_holder(self) -> SyncHolder | None:
        return lease.holder_of(self._tables, self.lease_seconds)

    # ---- manifest ------------------------------------------------------------------------
    def read_files(self, kb: str, generation: str | None = None, at: Pinned | None = None) -> dict[str, FileRecord]:
        return manifest.read_files(self._tables, kb, self._generation(kb, generation), None if at is None else at.files)

    def fingerprints(self, kb: str, generation: str, paths: Collection[str]) -> dict[str, tuple[int, int]]:
        return self._fingerprints.of(kb, generation, paths)

    def write_files(self, kb: str, generation: str, records: Sequence[FileRecord]) -> None:
        manifest.write_files(self._tables, kb, generation, records)

    def delete_files(self, kb: str, generation: str, paths: Sequence[str]) -> None:
        manifest.delete_files(self._tables, kb, generation, paths)

    # ---- chunks --------------------------------------------------------------------------
    def write_chunks(
        self, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, object]]]
    ) -> dict[str, str]:
        """One commit: each document's old chunks out, its rows in; a document whose values do not fit their
        columns is left out (its old chunks go too), with the reason by path."""
        if not rows_by_path:
            return {}
        rows, refused = self.chunk_rows(kb, generation, rows_by_path)
        self.replace_documents(kb, generation, list(rows_by_path), rows)
        return refused

    def chunk_rows(
        self, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, object]]]
    ) -> tuple[pa.Table, dict[str, str]]:
        return chunks.chunk_rows(self._tables, kb, generation, rows_by_path)

    def replace_documents(self, kb: str, generation: str, paths: Sequence[str], rows: pa.Table) -> None:
        chunks.replace_documents(self._tables, kb, generation, paths, rows)

    def delete_documents(self, kb: str, generation: str, paths: Sequence[str]) -> int:
        return chunks.delete_documents(self._tables, kb, generation, paths)

    def indexed_paths(self, kb: str, generation: str) -> set[str]:
        return chunks.indexed_paths(self._tables, kb, generation)

    def vectors_by_content_hash(self, kb: str, generation: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        return chunks.vectors_by_content_hash(self._tables, kb, generation, hashes)

    def count_chunks(self, kb: str, generation: str | None = None) -> int:
        return chunks.count_chunks(self._tables, kb, self._generation(kb, generation))

    def version(self, kb: str) -> int:
        return chunks.version(self._tables, kb, self.active_generation(kb))

    def document_titles(self, kb: str, generation: str, limit: int) -> list[str]:
        return chunks.document_titles(self._tables, kb, generation, limit)

    # ---- versions (versions.py): what each sync left, to read as of and to roll back to -------------
    def read_versions(self, kb: str) -> list[KBVersion]:
        return self._versions.read(kb)

    def write_version(self, kb: str, version: KBVersion) -> None:
        self._versions.write(kb, version)

    def forget_versions(self, kb: str, numbers: Sequence[int]) -> None:
        self._versions.forget(kb, numbers)

    def pinned_now(self, kb: str, generation: str) -> Pinned:
        return versions.pinned_now(self._tables, kb, generation)

    def restore(self, kb: str, generation: str, pinned: Pinned) -> Pinned:
        return versions.restore(self._tables, kb, generation, pinned)

    # ---- documents' reading forms (readings.py) --------------------------------------------
    def write_readings(self, kb: str, generation: str, paths: Sequence[str], rows: Sequence[ReadingRow]) -> None:
        readings.replace(self._tables, kb, generation, paths, rows)

    def delete_readings(self, kb: str, generation: str, paths: Sequence[str]) -> None:
        readings.delete(self._tables, kb, generation, paths)

    def reading_paths(self, kb: str, generation: str) -> set[str]:
        return readings.paths(self._tables, kb, generation)

    # LanceDB's reading row (ReadingRow's columns)
    def read_reading(self, kb: str, generation: str, path: str, at: Pinned | None = None) -> dict[str, Any] | None:
        if at is not None and at.reading is None:  # that version's generation had no reading table
            return None
        return self._rows.of(kb, generation, path, None if at is None else at.reading)

    def reading_listing(self, kb: str, generation: str, at: Pinned | None = None) -> pa.Table | None:
        if at is not None and at.reading is None:
            return None
        return self._listings.of(kb, generation, None if at is None else at.reading)

    # ---- a cluster's writes (fragments.py): rows written by workers, made visible by one commit ------
    def write_fragments(self, kb: str, generation: str, rows: pa.Table) -> bytes:
        return fragments.write_uncommitted(self._tables, kb, generation, rows)

    def commit_fragments(self, kb: str, generation: str, paths: Sequence[str], written: Sequence[bytes]) -> None:
        fragments.commit_wave(self._tables, kb, generation, paths, written)

    # ---- searches and indexes ---------------------------------------------------------------
    def view(self, kb: str, generation: str, at: Pinned | None = None) -> LanceChunkView | None:
        """Read queries on a generation's chunks (through the read cache; as version `at` left them, else the
        latest), or None when its table does not exist."""
        return self._views.open(kb, generation, None if at is None else at.chunks)

    def refresh_indexes(self, kb: str, generation: str, changed: bool) -> str:
        """Create missing indexes; after changes, fold new rows in (and add a vector index once the table is large),
        keeping the table versions the KB's recorded versions read."""
        return upkeep.refresh_indexes(
            self._tables, kb, generation, changed, VECTOR_INDEX_MIN_ROWS, self._versions.kept_since(kb)
        )
