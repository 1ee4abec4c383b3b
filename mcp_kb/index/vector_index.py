"""The vector index a chunk table gets by its size: none (exact search) while small, then HNSW-SQ, then IVF-PQ;
its partitions, when a grown table rebuilds it, and how searches of it re-rank (the refine factor)."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from ..schema import VECTOR_COLUMN

if TYPE_CHECKING:
    from lancedb.index import HnswSq, IvfPq
    from lancedb.table import LanceTable

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


def refresh_vector_index(table: LanceTable, names: list[str], min_rows: int) -> str:
    """Build the vector index once the table has `min_rows`, and again when it has grown 4× past the
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
    if rows < min_rows:
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

    def config(self) -> IvfPq | HnswSq:
        from lancedb.index import HnswSq, IvfPq

        if self.pq:
            return IvfPq(distance_type="cosine", num_partitions=self.partitions, num_sub_vectors=self.sub_vectors)
        return HnswSq(distance_type="cosine", num_partitions=self.partitions)


def refine_factor(table: LanceTable) -> int:
    """How the table's vector index is searched: the refine factor of its kind (0: none, or not refined)."""
    kinds = [VectorIndex.named(index.name) for index in table.list_indices() if index.columns == [VECTOR_COLUMN]]
    return max((kind.refine_factor for kind in kinds if kind), default=0)


def _newest_vector_index(table: LanceTable, names: list[str]) -> str | None:
    """The vector index with the most partitions; others (a rebuild cut short before it dropped the
    old one) are dropped."""
    if not names:
        return None
    newest = max(names, key=lambda name: (getattr(VectorIndex.named(name), "partitions", 0), name))
    for name in names:
        if name != newest:
            table.drop_index(name)
    return newest
