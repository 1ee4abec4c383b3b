"""The state table: one row per KB holding its state as JSON (active generation, model identity, settings, last
sync; records.KBState reads it), and the notes kept beside it. Writing a KB's row is what switches generations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import StoreError
from ..records import HealthCheck, KBState, KBSummary
from .contract import Note
from .connection import PerKB, upsert
from .failures import store_failures
from .filters import sql_equals
from .upkeep import compact_when_worth_it

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables

# Bump when the tables' layout changes: the next sync rebuilds each KB (beside the old index) by itself.
# An index with a higher number was written by a newer mcp-kb, and is refused rather than rebuilt over.
LAYOUT_VERSION = 3  # 3: chunks keep their parts, text sources read as the files
_STATE_TABLE = "_state"
_STATE_SCHEMA = pa.schema([("kb", pa.string()), ("state", pa.string())])
_NOTE_KINDS: dict[type[KBSummary | HealthCheck], str] = {KBSummary: "summary", HealthCheck: "health"}


class StateTable:
    """The KBs' state rows."""

    def __init__(self, tables: Tables):
        self._tables = tables
        self._rows = PerKB(tables, _STATE_TABLE, _read_row)
        self._states = PerKB(tables, _STATE_TABLE, lambda table, kb: KBState.from_dict(_read_row(table, kb)))

    @property
    def uri(self) -> str:
        return self._tables.uri

    @store_failures("be read (a KB's state)")
    def state(self, kb: str) -> KBState:
        """The KB's state (an empty one before its first sync)."""
        return self._states.of(kb) or KBState()

    @store_failures("be read (a KB's note)")
    def note(self, kb: str, kind: type[Note]) -> Note | None:
        saved = self._rows.of(_note_key(kb, kind))
        return kind.from_dict(saved) if saved else None

    def write_note(self, kb: str, note: KBSummary | HealthCheck) -> None:
        self.write(_note_key(kb, type(note)), note.as_dict())

    @store_failures("be written (a KB's state)")
    def write(self, kb: str, state: Mapping[str, object]) -> None:
        """Replace the KB's state row (or a note) in one commit."""
        row = pa.table({"kb": [kb], "state": [json.dumps(state, ensure_ascii=False)]}, schema=_STATE_SCHEMA)
        table = self._tables.created(_STATE_TABLE, schema=_STATE_SCHEMA)
        upsert(table, "kb", row)
        compact_when_worth_it(table, unindexed=0)  # every sync rewrites the row: keep the table one read


def _note_key(kb: str, kind: type[KBSummary | HealthCheck]) -> str:
    """Where a KB's note of a kind is kept: ":" never occurs in a KB name, so keys never meet."""
    return f"{kb}:{_NOTE_KINDS[kind]}"


def _read_row(table: LanceTable, kb: str) -> dict[str, object]:
    """A row's JSON as saved (a dict: json.loads hands it over)."""
    rows = table.search().where(sql_equals("kb", kb)).limit(1).to_list()
    state: dict[str, object] = json.loads(rows[0]["state"]) if rows else {}  # a JSON object: KBState.as_dict wrote it
    _refuse_newer_layout(kb, state)
    return state


def _refuse_newer_layout(kb: str, state: Mapping[str, object]) -> None:
    """Only older layouts are migrated (by a rebuild): rebuilding over a newer one would drop its data."""
    layout = state.get("layout")
    if isinstance(layout, int) and layout > LAYOUT_VERSION:
        raise StoreError(
            f"knowledge base {kb!r}: this index was written by a newer mcp-kb (layout {layout}; this "
            f"version reads layout {LAYOUT_VERSION} and older); upgrade mcp-kb, or point storage "
            f"elsewhere. Nothing was changed."
        )
