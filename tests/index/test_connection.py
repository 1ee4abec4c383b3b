"""The tables at one storage location, as the store opens them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from mcp_kb.index.connection import Tables


def test_every_table_is_found_past_the_first_page_of_a_listing(tmp_path: Path) -> None:
    """lancedb 0.41 lists tables 100 a page: an index of many KBs (several tables each, per generation) had the
    101st and later looked missing, as if never synced."""
    tables = Tables(str(tmp_path / "index"), {}, 0.0, None, None)
    names = {f"kb{n:03d}__chunks" for n in range(230)}
    for name in sorted(names):
        tables.db.create_table(name, pa.table({"a": [1]}))
    assert tables.names() == names
    assert tables.table("kb229__chunks") is not None and tables.table("kb230__chunks") is None
