"""Read views of a generation's chunks for searches (the ChunkView contract): nearest by vector, BM25 by keyword,
rows by address, scans and samples; and which view a search gets (through the read cache)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError
from ..lru import BoundedLRU
from ..schema import FIELD_COLUMN, HIT_COLUMNS, KEYWORD_COLUMN, VECTOR_COLUMN
from .lance_query import query_arrow, text_query, vector_query
from .contract import Candidate
from .filters import sql_in, sql_near
from .generations import chunk_table_name, forget_all_but
from .vector_index import refine_factor

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables


class Views:
    """Views of a storage location's generations, through the read cache."""

    def __init__(self, tables: Tables):
        self._tables = tables
        # What a search needs to know of each table version, read once: on object storage listing the indexes is a
        # request, and reading the schema took 5 % of a search's CPU.
        self._facts: BoundedLRU[tuple[str, int], _TableFacts] = BoundedLRU(64)

    def open(self, kb: str, generation: str, at: int | None = None) -> LanceChunkView | None:
        """Read queries on a generation's chunks (at table version `at`; None: the latest), or None when its table
        does not exist."""
        name = chunk_table_name(kb, generation)
        if at is None:  # the active generation: the handles of others may go
            forget_all_but(self._tables, kb, generation)
        table = self._tables.search_table_at(name, at)
        if table is None:
            return None
        version = table.version
        facts = self._facts.get((name, version))
        if facts is None:
            facts = _TableFacts.of(table)
            self._facts.put((name, version), facts)
        return LanceChunkView(table, generation, version, facts)


@dataclass(frozen=True)
class _TableFacts:
    """What searches read of a table version's schema and indexes."""

    dimension: int  # of its vectors
    has_field_column: bool  # tables from before FIELD_COLUMN have none
    refine_factor: int  # of its vector index; 0: none, or not refined
    hit_columns: list[str]  # HIT_COLUMNS it has (tables of layout 2 and before have no `parts`)

    @classmethod
    def of(cls, table: LanceTable) -> _TableFacts:
        schema = table.schema
        return cls(
            schema.field(VECTOR_COLUMN).type.list_size,
            FIELD_COLUMN in schema.names,
            refine_factor(table),
            [column for column in HIT_COLUMNS if column in schema.names],
        )


class LanceChunkView:
    """Read queries on one generation of a KB's chunks. Callers get plain candidates and rows;
    LanceDB's queries, its `_distance`/`_score`/`_rowid` columns and their quirks stay here."""

    def __init__(self, table: LanceTable, generation: str, version: int, facts: _TableFacts):
        self._table = table
        self.generation = generation
        self._version = version  # read once per view: with read_consistency 0 each read looks for a newer one
        self._facts = facts

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
        stored = self._facts.dimension
        if len(vector) != stored:  # the model (or a service behind the same name) changed since the last sync
            raise ModelError(
                f"the query vector has {len(vector)} dimensions but this index holds {stored}-dimensional "
                f"ones; the next sync rebuilds the index for the model now configured"
            )
        search = vector_query(self._table, vector, VECTOR_COLUMN).distance_type("cosine")
        if self._facts.refine_factor:
            search = search.refine_factor(self._facts.refine_factor)
        if where:
            search = search.where(where, prefilter=True)
        columns = ["id", "_distance"] if self._facts.refine_factor else ["id", VECTOR_COLUMN, "_distance"]
        rows = query_arrow(self._table, search.select(columns).with_row_id(True).limit(depth))
        if rows.num_rows == 0:
            return []
        if self._facts.refine_factor:
            similarities = (1.0 - np.asarray(rows["_distance"], dtype=np.float64)).tolist()
        else:
            # the vectors as one array, not a Python float each (20,000 of them for 50 candidates)
            vectors = rows[VECTOR_COLUMN].combine_chunks().flatten().to_numpy().reshape(rows.num_rows, stored)
            norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(vector) + 1e-12
            similarities = (vectors @ vector / norms).tolist()
        found = sorted(
            zip(rows["id"].to_pylist(), similarities, rows["_rowid"].to_pylist()),
            key=lambda item: item[1],
            reverse=True,
        )
        return [
            Candidate(chunk, score, row_id, vector_rank=rank)
            for rank, (chunk, score, row_id) in enumerate(found, start=1)
        ]

    def keyword(self, terms: str, where: str | None, depth: int, field_weight: float = 0.0) -> list[Candidate]:
        """BM25 matches of analysed terms (keywords.py). A table whose full-text index is not built yet is
        searched by a flat scan (LanceDB does that itself), so every failure here is a real one and raises.

        With a field weight, a chunk's BM25 in its title and heading path is added, times the weight.
        Added, not LanceDB's MultiMatchQuery: that takes the best column's score, so a weight below 1
        changed nothing and a match in both counted no more than in one."""
        found = self._matches(KEYWORD_COLUMN, terms, where, depth)
        if field_weight and self._facts.has_field_column:
            for chunk, (score, row_id) in self._matches(FIELD_COLUMN, terms, where, depth).items():
                body_score, body_row = found.get(chunk, (0.0, row_id))
                found[chunk] = (body_score + field_weight * score, body_row)
        # a stable sort: ties keep BM25's order
        ranked = sorted(found.items(), key=lambda item: item[1][0], reverse=True)[:depth]
        return [
            Candidate(chunk, score, row_id, keyword_rank=rank)
            for rank, (chunk, (score, row_id)) in enumerate(ranked, start=1)
        ]

    def _matches(self, column: str, terms: str, where: str | None, depth: int) -> dict[str, tuple[float, int]]:
        """BM25 of the best `depth` chunks in one full-text column: id -> (score, row id)."""
        search = text_query(self._table, terms, column)
        if where:
            search = search.where(where, prefilter=True)
        rows = query_arrow(self._table, search.select(["id", "_score"]).with_row_id(True).limit(depth))
        return {
            chunk: (score, row_id)
            for chunk, score, row_id in zip(
                rows["id"].to_pylist(), rows["_score"].to_pylist(), rows["_rowid"].to_pylist()
            )
        }

    def rows(self, candidates: list[Candidate]) -> dict[str, dict[str, Any]]:  # LanceDB's rows
        """The hit columns of these candidates by id, read by row address.

        Reading the fields of the few winners afterwards is cheaper than reading them for every
        candidate of both sides (hybrid p50 at 100k chunks 33 ms vs 41 ms). A row a sync rewrote in
        between no longer matches its id and is left out.
        """
        if not candidates:
            return {}
        try:
            rows = self._table.take_row_ids([c.row_id for c in candidates]).select(self._facts.hit_columns).to_list()
        except Exception:  # addresses moved (a compaction ran in between): look the ids up instead
            rows = self._scan(sql_in("id", [c.id for c in candidates]), self._facts.hit_columns)
        return {row["id"]: row for row in rows}

    def scan(self, where: str) -> list[dict[str, Any]]:  # LanceDB's rows
        """Every chunk matching a predicate, in document order."""
        rows = self._scan(where, self._facts.hit_columns)
        return sorted(rows, key=lambda row: (row["path"], row["chunk_index"]))

    def neighbours(self, spots: list[tuple[str, int]], n: int) -> dict[tuple[str, int], str]:
        """Text of the chunks within `n` positions of each (path, chunk_index)."""
        rows = self._scan(sql_near(spots, n), ["path", "chunk_index", "text"])
        return {(row["path"], row["chunk_index"]): row["text"] for row in rows}

    def sample(self, n: int, seed: int) -> list[dict[str, Any]]:  # LanceDB's rows
        """Up to `n` chunks drawn at random (the same ones for the same seed and table)."""
        total = self._table.count_rows()
        offsets = sorted(random.Random(seed).sample(range(total), min(n, total)))
        return self._table.take_offsets(offsets).select(self._facts.hit_columns).to_list() if offsets else []

    def _scan(self, where: str, columns: list[str]) -> list[dict[str, Any]]:  # LanceDB's rows
        """Rows as LanceDB hands them over: column name to value."""
        return self._table.search().where(where).select(columns).limit(None).to_list()
