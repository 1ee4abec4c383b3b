"""Reading rows and listings kept in memory per table version."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mcp_kb.index import readings
from mcp_kb.index.connection import Tables
import pytest

if TYPE_CHECKING:
    from lancedb.table import LanceTable


def test_a_row_fetched_while_a_sync_commits_is_not_kept_as_the_older_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows.of read the table's version, then fetched through a handle that had moved on: the newer row was kept
    under the older version, and a read as of that version was given it."""
    folder = str(tmp_path / "index")
    tables = Tables(folder, {}, 0.0, None, None)
    before = tables.db.create_table("kb__reading__g", pa.table({"path": ["a.md"], "text": ["old"]})).version
    rows = readings.Rows(tables)
    fetch_row = readings.fetch_row

    def committing_first(
        handle: LanceTable, path: str
    ) -> dict[str, Any] | None:  # another process's sync commits between the two
        Tables(folder, {}, 0.0, None, None).db.open_table("kb__reading__g").update(
            where="path = 'a.md'", values={"text": "new"}
        )
        monkeypatch.setattr(readings, "fetch_row", fetch_row)
        return fetch_row(handle, path)

    monkeypatch.setattr(readings, "fetch_row", committing_first)
    assert (rows.of("kb", "g", "a.md") or {})["text"] == "new"
    assert (rows.of("kb", "g", "a.md", at=before) or {})["text"] == "old"
    assert (rows.of("kb", "g", "a.md") or {})["text"] == "new"
