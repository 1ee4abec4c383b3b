"""A search's LanceDB queries run in one hand-off each (index/lance_query.py), with LanceDB's own results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pytest

from mcp_kb.index.lance_query import query_arrow, text_query, vector_query

if TYPE_CHECKING:
    from lancedb.table import LanceTable

_CHANGED = "LanceDB changed what mcp_kb/index/lance_query.py relies on (its query builders or _execute_query)"
WORDS = ["aspirin", "heart", "attack", "risk", "dose", "trial", "blood", "pressure", "stroke", "diet"]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> LanceTable:
    import lancedb
    from lancedb.index import FTS
    from lancedb.table import LanceTable

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(600, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [" ".join(rng.choice(WORDS, size=6)) for _ in range(600)]
    data = pa.table(
        {
            "id": [f"c{i}" for i in range(600)],
            "path": [f"doc{i % 7}.md" for i in range(600)],
            "search_text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 32),
        }
    )
    created = lancedb.connect(tmp_path_factory.mktemp("lance")).create_table("chunks", data)
    created.create_index("search_text", config=FTS(base_tokenizer="whitespace", with_position=False))
    assert isinstance(created, LanceTable)  # a local folder's table
    return created


@pytest.fixture
def hand_offs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a call hands off to LanceDB's event loop."""
    from lancedb.background_loop import LOOP

    counted: list[int] = []
    run: Any = LOOP.run  # lancedb's loop carries no annotations

    def counting(work: Any) -> Any:
        counted.append(1)
        return run(work)

    monkeypatch.setattr(LOOP, "run", counting)
    return counted


@pytest.mark.parametrize("where", [None, "path = 'doc3.md'"])
def test_a_vector_query_gives_lancedbs_answer_in_one_hand_off(
    table: LanceTable, hand_offs: list[int], where: str | None
) -> None:
    query = np.random.default_rng(1).normal(size=32).astype(np.float32)

    def built(search: Any) -> Any:
        search = search.distance_type("cosine")
        search = search.where(where, prefilter=True) if where else search
        return search.select(["id", "vector", "_distance"]).with_row_id(True).limit(20)

    expected = built(table.search(query, vector_column_name="vector")).to_arrow()
    hand_offs.clear()
    found = query_arrow(table, built(vector_query(table, query, "vector")))
    assert len(hand_offs) == 1, _CHANGED
    assert found.num_rows == 20 and found.equals(expected), _CHANGED


@pytest.mark.parametrize("where", [None, "path = 'doc3.md'"])
def test_a_keyword_query_gives_lancedbs_answer_in_one_hand_off(
    table: LanceTable, hand_offs: list[int], where: str | None
) -> None:
    def built(search: Any) -> Any:
        search = search.where(where, prefilter=True) if where else search
        return search.select(["id", "_score"]).with_row_id(True).limit(20)

    expected = built(table.search("aspirin stroke", query_type="fts", fts_columns="search_text")).to_arrow()
    hand_offs.clear()
    found = query_arrow(table, built(text_query(table, "aspirin stroke", "search_text")))
    assert len(hand_offs) == 1, _CHANGED
    assert found.num_rows > 0 and found.sort_by("_rowid").equals(expected.sort_by("_rowid")), _CHANGED


def test_lancedbs_own_query_still_hands_off_more_than_once(table: LanceTable, hand_offs: list[int]) -> None:
    """What lance_query.py saves: if LanceDB's own path came down to one hand-off, this module can go."""
    table.search("aspirin", query_type="fts", fts_columns="search_text").with_row_id(True).limit(5).to_arrow()
    assert len(hand_offs) > 1, "LanceDB's own query now hands off once: mcp_kb/index/lance_query.py is not needed"
