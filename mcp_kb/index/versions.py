"""The version table: per KB, one row per version a sync or a rollback recorded (the record itself is the core's,
history.py; here it is JSON beside its number), and the table versions a version pins: its generation's chunk
table, manifest and reading table as that sync left them. Those table versions are what an `as_of` read checks
out and what a rollback restores; compaction keeps every table version since the oldest recorded one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .connection import upsert
from .contract import Pinned
from .failures import store_failures
from .filters import sql_equals, sql_in
from .generations import chunk_table_name, file_table_name
from .readings import reading_table_name

if TYPE_CHECKING:
    from .connection import Tables

_VERSIONS_TABLE = "_versions"
# `started`: when the sync that wrote the version began (RFC 3339, UTC): compaction keeps what was written since;
# `generation`: the generation whose tables it pins, kept while a version does.
_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("kb", pa.string()),
        ("number", pa.int64()),
        ("started", pa.string()),
        ("generation", pa.string()),
        ("record", pa.string()),
    ]
)


@dataclass(frozen=True)
class _Row:
    started: str
    generation: str
    record: dict[str, Any]


class VersionTable:
    """The KBs' version records, each KB's read again only once the table has a new version."""

    def __init__(self, tables: Tables):
        self._tables = tables
        self._by_kb: dict[str, tuple[int, list[_Row]]] = {}  # (table version, rows)

    @property
    def uri(self) -> str:
        return self._tables.uri

    def read(self, kb: str) -> list[dict[str, Any]]:
        """The KB's version records, oldest first ([] before its first recorded version)."""
        return [row.record for row in self._rows(kb)]

    def kept_since(self, kb: str) -> datetime | None:
        """When the sync that wrote the KB's oldest recorded version started (None: no version recorded)."""
        rows = self._rows(kb)
        return min(datetime.fromisoformat(row.started) for row in rows) if rows else None

    def generations(self, kb: str) -> set[str]:
        """The generations the KB's recorded versions pin."""
        return {row.generation for row in self._rows(kb)}

    @store_failures("be read (a KB's versions)")
    def _rows(self, kb: str) -> list[_Row]:
        table = self._tables.table(_VERSIONS_TABLE)
        if table is None:
            return []
        version = table.version
        cached = self._by_kb.get(kb)
        if cached and cached[0] == version:
            return cached[1]
        found = table.search().where(sql_equals("kb", kb)).select(["number", "started", "generation", "record"])
        rows = [
            _Row(row["started"], row["generation"], json.loads(row["record"]))
            for row in sorted(found.limit(None).to_list(), key=lambda row: row["number"])
        ]
        self._by_kb[kb] = (version, rows)
        return rows

    @store_failures("be written (a KB's versions)")
    def write(
        self,
        kb: str,
        number: int,
        started: str,
        generation: str,
        record: dict[str, Any],
    ) -> None:
        """Record (or replace) version `number` of the KB in one commit; `started`: when its sync began."""
        row = pa.table(
            {
                "key": [f"{kb}#{number}"],
                "kb": [kb],
                "number": [number],
                "started": [started],
                "generation": [generation],
                "record": [json.dumps(record, ensure_ascii=False)],
            },
            schema=_SCHEMA,
        )
        upsert(self._tables.created(_VERSIONS_TABLE, schema=_SCHEMA), "key", row)

    @store_failures("be written (forgetting a KB's versions)")
    def forget(self, kb: str, numbers: Sequence[int]) -> None:
        table = self._tables.table(_VERSIONS_TABLE)
        if table is None or not numbers:
            return
        table.delete(sql_in("key", [f"{kb}#{number}" for number in numbers]))


@store_failures("be read (the versions of a generation's tables)")
def pinned_now(tables: Tables, kb: str, generation: str) -> Pinned:
    """The versions the generation's tables are at now (what a version records at the end of a sync)."""
    chunks, files = tables.table(chunk_table_name(kb, generation)), tables.table(file_table_name(kb, generation))
    reading = tables.table(reading_table_name(kb, generation))
    if chunks is None or files is None:
        raise ValueError(f"generation {generation} has no tables")
    return Pinned(chunks.version, files.version, None if reading is None else reading.version)


@store_failures("roll back (restoring a version's tables)")
def restore(tables: Tables, kb: str, generation: str, pinned: Pinned) -> Pinned:
    """Make each of the generation's tables hold again what it held at `pinned`, each as a new table version
    (the history stays). Not one commit: the caller (history.py) marks the rollback first, so a crash between
    tables is finished by doing this again, which gives the same tables."""
    named = [
        (file_table_name(kb, generation), pinned.files),
        (chunk_table_name(kb, generation), pinned.chunks),
        (reading_table_name(kb, generation), pinned.reading),
    ]
    for name, version in named:
        table = tables.table(name)
        if table is not None and version is not None:
            table.restore(version)
    return pinned_now(tables, kb, generation)
