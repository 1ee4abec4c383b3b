"""The store contract: what sync, search, the sync lock and the faces ask of an index, as protocols.

`LanceStore` (store.py) is the one backend today, for a folder, object storage (s3:// gs:// az://)
and LanceDB's other URIs; another backend implements these methods and is proven by the same
suite (tests/index/test_store_contract.py runs it on a folder and on an S3-compatible server). The
writer's lease is part of the contract, so the sync lock (state.py) works on any backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..records import HealthCheck, KBState, KBSummary, KBVersion, Pinned, SyncProgress
from ..schema import ReadingRow

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


Note = TypeVar("Note", KBSummary, HealthCheck)  # the small records a KB keeps beside its state


@dataclass(frozen=True)
class FileRecord:
    """A row of the manifest: what the index holds for one source document."""

    path: str
    file_hash: str
    size: int
    mtime_ns: int
    n_chunks: int
    status: str  # indexed | failed
    reason: str = ""


@dataclass(frozen=True)
class SyncHolder:
    """The sync holding an index's writer lock (a lease on object storage, a lock file in a folder), as it wrote
    itself down: its id, process, host, KBs and start, and how far it is with each KB (the lease's heartbeat)."""

    id: str
    pid: int | None = None  # None: not written down (an older or damaged record)
    host: str = ""
    kbs: tuple[str, ...] | None = None  # None: not written down (it counts as syncing every KB)
    started_at: str = ""
    progress: Mapping[str, SyncProgress] = field(default_factory=dict)

    @staticmethod
    def from_dict(saved: Mapping[str, Any]) -> SyncHolder:
        """A holder as saved (JSON), read leniently: a record written by hand or by an older version still names
        what it can."""
        pid, kbs = saved.get("pid"), saved.get("kbs")
        return SyncHolder(
            str(saved.get("id", "")),
            pid if isinstance(pid, int) else None,
            str(saved.get("host", "")),
            tuple(str(kb) for kb in kbs) if isinstance(kbs, list) else None,
            str(saved.get("started_at", "")),
            {kb: SyncProgress.from_dict(done) for kb, done in (saved.get("progress") or {}).items()},
        )

    def as_dict(self) -> dict[str, object]:
        """The saved form (its progress is kept apart: the lease's heartbeat rewrites it)."""
        kbs = {"kbs": list(self.kbs)} if self.kbs is not None else {}
        return {"id": self.id, "pid": self.pid, "host": self.host, **kbs, "started_at": self.started_at}

    def syncs(self, kb: str) -> bool:
        """Whether this sync is syncing `kb`."""
        return self.kbs is None or kb in self.kbs


@dataclass(frozen=True)
class Candidate:
    """A chunk found by one side of a search (or both, after fusion): its id, score and row address (in its KB's
    table: `kb` names it when a search pools several)."""

    id: str
    score: float
    row_id: int
    vector_rank: int | None = None
    keyword_rank: int | None = None
    kb: str = ""


class ChunkView(Protocol):
    """Read queries on one generation of a KB's chunks: plain candidates and rows (dicts: rows as
    LanceDB hands them over, the hit columns and the KB's own metadata columns)."""

    generation: str

    @property
    def version(self) -> int: ...

    def nearest(self, vector: np.ndarray, where: str | None, depth: int) -> list[Candidate]:
        """The `depth` chunks nearest by cosine, best first; `score` is the cosine."""

    def keyword(self, terms: str, where: str | None, depth: int, field_weight: float = 0.0) -> list[Candidate]:
        """Chunks matching the analysed terms by BM25, best first (raises when the table cannot be read).
        With a `field_weight`, a match in the title or heading path adds that many times its BM25 there."""

    def rows(self, candidates: list[Candidate]) -> dict[str, dict[str, Any]]: ...  # LanceDB's rows

    def scan(self, where: str) -> list[dict[str, Any]]: ...  # LanceDB's rows

    def neighbours(self, spots: list[tuple[str, int]], n: int) -> dict[tuple[str, int], str]: ...

    def sample(self, n: int, seed: int) -> list[dict[str, Any]]: ...  # LanceDB's rows


class Store(Protocol):
    """All KBs' tables at one storage location, in generations switched by one state write."""

    uri: str
    lease_seconds: float
    layout: int  # the version of what it writes (a sync's fingerprint: a change rebuilds)

    @property
    def is_remote(self) -> bool: ...

    # generations and state
    def active_generation(self, kb: str) -> str | None: ...

    def chunk_schema(self, kb: str, generation: str | None = None) -> pa.Schema | None:
        """The schema of a generation's chunk table, None when it has none."""

    def create_generation(self, kb: str, generation: str, schema: pa.Schema) -> None: ...

    def drop_generations(self, kb: str, keep: set[str]) -> list[str]: ...

    def read_state(self, kb: str) -> KBState: ...

    def write_state(self, kb: str, state: KBState) -> None: ...

    def read_note(self, kb: str, kind: type[Note]) -> Note | None:
        """The KB's note of that kind (its summary, its latest health check), None when none was written."""

    def write_note(self, kb: str, note: KBSummary | HealthCheck) -> None: ...

    # the writer's lease (object storage; a folder uses an OS lock beside it)
    def take_lease(self, holder: SyncHolder) -> SyncHolder | None:
        """None when taken; else the holder that has it."""

    def renew_lease(self, holder_id: str, progress: Mapping[str, SyncProgress]) -> bool: ...

    def release_lease(self, holder_id: str) -> None: ...

    def lease_holder(self) -> SyncHolder | None: ...

    # manifest and chunks
    def read_files(self, kb: str, generation: str | None = None, at: Pinned | None = None) -> dict[str, FileRecord]:
        """The manifest of a generation (the active one by default), as version `at` left it (None: now)."""

    def fingerprints(self, kb: str, generation: str, paths: Collection[str]) -> dict[str, tuple[int, int]]:
        """The source fingerprints (size, mtime_ns) the current manifest of a generation holds for these documents (a
        sync that finds a touched file's bytes unchanged updates them), read once per table version."""

    def write_files(self, kb: str, generation: str, records: Sequence[FileRecord]) -> None: ...

    def delete_files(self, kb: str, generation: str, paths: Sequence[str]) -> None: ...

    def replace_documents(self, kb: str, generation: str, paths: Sequence[str], rows: pa.Table) -> None:
        """One commit: the documents' old chunks out, `rows` in."""

    def write_chunks(
        self, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, object]]]
    ) -> dict[str, str]:
        """replace_documents from plain rows (ChunkRow fields and the KB's metadata columns, as Arrow takes them)
        per document; a document whose values do not fit their columns is left out, its reason returned by path."""

    def delete_documents(self, kb: str, generation: str, paths: Sequence[str]) -> int: ...

    # versions: one record per version a sync or rollback made (history.py writes them), and the table versions
    # each pins; a recorded version's generation is never dropped, nor its table versions cleaned
    def read_versions(self, kb: str) -> list[KBVersion]:
        """The KB's version records, oldest first."""

    def write_version(self, kb: str, version: KBVersion) -> None:
        """Record (or replace) a version by its number; the table versions since its sync `started` are kept."""

    def forget_versions(self, kb: str, numbers: Sequence[int]) -> None: ...

    def pinned_now(self, kb: str, generation: str) -> Pinned:
        """The versions the generation's tables are at now."""

    def restore(self, kb: str, generation: str, pinned: Pinned) -> Pinned:
        """Each of the generation's tables made to hold what it held at `pinned`, as new table versions (the
        manifest first); the table versions after."""

    # documents' reading forms (schema.ReadingRow), one row per indexed document of a generation
    def write_readings(self, kb: str, generation: str, paths: Sequence[str], rows: Sequence[ReadingRow]) -> None:
        """One commit: the reading forms of `paths` replaced by `rows` (a path without a row loses its own); a
        generation built before reading tables is left without one."""

    def delete_readings(self, kb: str, generation: str, paths: Sequence[str]) -> None: ...

    def reading_paths(self, kb: str, generation: str) -> set[str]: ...

    # LanceDB's reading row (ReadingRow's columns)
    def read_reading(self, kb: str, generation: str, path: str, at: Pinned | None = None) -> dict[str, Any] | None:
        """A document's reading row as LanceDB hands it over (as version `at` left it; None: now; an older table
        lacks later columns), None when the generation holds no such document or no reading table."""

    def reading_listing(self, kb: str, generation: str, at: Pinned | None = None) -> pa.Table | None:
        """schema.LISTING_COLUMNS of every document (as version `at` left them), in path order; None when the
        generation has no reading table."""

    # a cluster's writes: its indexers write fragments, its coordinator commits a wave of them at once
    def chunk_rows(
        self, kb: str, generation: str, rows_by_path: Mapping[str, list[dict[str, object]]]
    ) -> tuple[pa.Table, dict[str, str]]:
        """Plain rows per document as one table of the generation's columns, and the reasons of documents whose
        values did not fit them, by path (those are left out)."""

    def write_fragments(self, kb: str, generation: str, rows: pa.Table) -> bytes:
        """Rows written to the storage as fragments no reader sees until committed; what commits them."""

    def commit_fragments(self, kb: str, generation: str, paths: Sequence[str], written: Sequence[bytes]) -> None:
        """One commit: the documents' (`paths`) old chunks out, the written fragments in."""

    def indexed_paths(self, kb: str, generation: str) -> set[str]: ...

    def vectors_by_content_hash(self, kb: str, generation: str, hashes: Sequence[str]) -> dict[str, list[float]]: ...

    def count_chunks(self, kb: str, generation: str | None = None) -> int: ...

    def version(self, kb: str) -> int: ...

    def view(self, kb: str, generation: str, at: Pinned | None = None) -> ChunkView | None:
        """Read queries on a generation's chunks, as version `at` left them (None: now)."""

    def document_titles(self, kb: str, generation: str, limit: int) -> list[str]:
        """Titles of a generation's documents as its writer has just written them (for the sync summary)."""

    def refresh_indexes(self, kb: str, generation: str, changed: bool) -> str:
        """Build or fold in search indexes; a one-line description of the index state."""


def view_of(store: Store, kb: str, generation: str | None, at: Pinned | None = None) -> ChunkView | None:
    """What searches read of a KB's generation (as version `at` left it); None before any sync committed one (or
    when its tables are gone)."""
    return store.view(kb, generation, at) if generation is not None else None


def new_generation() -> str:
    """A generation id that never repeats, so nothing keyed by it (caches) can outlive a rebuild."""
    return uuid.uuid4().hex[:12]
