"""The store through its public functions: generations, state, writes and the read view (no model needed)."""

import numpy as np
import pyarrow as pa
import pytest

from mcp_kb.index.schema import ChunkRow, chunk_schema
from mcp_kb.index.store import Store, chunk_table_name, new_generation

DIM = 4


def _row(path: str, index: int, text: str, vector: list[float]) -> dict:
    return ChunkRow(id=f"{path}#{index}", path=path, chunk_index=index, heading="H", title="T", page=None,
                    line_start=1, line_end=2, text=text, search_text=text.lower(), content_hash=f"h-{text}",
                    file_hash="f", n_tokens=3, vector=vector).as_dict()


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "index"))


def _fill(store: Store, kb: str = "docs") -> str:
    generation = new_generation()
    store.create_generation(kb, generation, chunk_schema(DIM, {}))
    rows = [_row("a.md", 0, "alpha first", [1, 0, 0, 0]), _row("a.md", 1, "alpha second", [0.9, 0.1, 0, 0]),
            _row("a.md", 2, "alpha third", [0, 1, 0, 0]), _row("b.md", 0, "beta only", [0, 0, 1, 0])]
    table = pa.Table.from_pylist(rows, schema=store.chunk_table(kb, generation).schema)
    store.replace_documents(kb, generation, ["a.md", "b.md"], table)
    store.write_state(kb, {"generation": generation})
    return generation


def test_the_state_row_names_the_active_generation_and_other_handles_see_a_switch(store, tmp_path):
    assert store.active_generation("docs") is None and store.chunk_table("docs") is None
    first = _fill(store)
    other = Store(store.uri)  # another process's handle
    assert other.active_generation("docs") == first and other.count_chunks("docs") == 4
    second = _fill(store)
    assert first != second and other.active_generation("docs") == second


def test_dropping_generations_keeps_what_is_asked_and_touches_no_other_kb(store):
    old = _fill(store, "a")
    new = _fill(store, "a")
    _fill(store, "a__chunks__b")  # a KB whose name looks like a table of KB "a"
    assert store.drop_generations("a", keep={new}) == [old]
    names = set(store.db.list_tables().tables)
    assert chunk_table_name("a", new) in names and chunk_table_name("a", old) not in names
    assert store.count_chunks("a__chunks__b") == 4


def test_an_index_from_before_generations_reads_its_old_table_names():
    from mcp_kb.index.store import file_table_name, generation_of

    assert generation_of({"model": {"name": "m"}}) == "" and generation_of({}) is None
    assert chunk_table_name("docs", "") == "docs__chunks" and file_table_name("docs", "") == "docs__files"


def test_replacing_documents_is_one_commit_that_removes_their_old_chunks(store):
    generation = _fill(store)
    version = store.version("docs")
    table = pa.Table.from_pylist([_row("a.md", 0, "alpha rewritten", [1, 0, 0, 0])],
                                 schema=store.chunk_table("docs").schema)
    store.replace_documents("docs", generation, ["a.md"], table)
    assert store.version("docs") == version + 1
    assert store.indexed_paths("docs", generation) == {"a.md", "b.md"} and store.count_chunks("docs") == 2


def test_vectors_are_found_by_content_hash_in_any_generation(store):
    generation = _fill(store)
    found = store.vectors_by_content_hash("docs", generation, ["h-beta only", "h-missing"])
    assert list(found) == ["h-beta only"] and np.allclose(found["h-beta only"], [0, 0, 1, 0])


def test_nearest_scores_are_exact_cosines(store):
    generation = _fill(store)
    view = store.view("docs", generation)
    query = np.asarray([1, 0.05, 0, 0], dtype=np.float32)
    found = view.nearest(query, None, depth=3)
    assert [c.id for c in found] == ["a.md#0", "a.md#1", "a.md#2"]
    expected = float(query @ np.asarray([0.9, 0.1, 0, 0]) / (np.linalg.norm(query) * np.linalg.norm([0.9, 0.1, 0, 0])))
    assert found[1].score == pytest.approx(expected, abs=1e-6) and found[0].vector_rank == 1
    assert [c.id for c in view.nearest(query, "path = 'b.md'", depth=3)] == ["b.md#0"]


def test_keyword_finds_terms_before_and_after_the_full_text_index_is_built(store):
    generation = _fill(store)
    view = store.view("docs", generation)
    unindexed = view.keyword("alpha", None, depth=10)  # new rows are scanned until the index folds them in
    store.refresh_indexes("docs", generation, changed=True)
    indexed = view.keyword("alpha", None, depth=10)
    assert {c.id for c in indexed} == {c.id for c in unindexed} == {"a.md#0", "a.md#1", "a.md#2"}
    assert indexed[0].keyword_rank == 1 and view.keyword("gamma", None, depth=10) == []


def test_rows_scan_and_neighbours(store):
    generation = _fill(store)
    view = store.view("docs", generation)
    candidates = view.nearest(np.asarray([0, 0, 1, 0], dtype=np.float32), None, depth=1)
    assert view.rows(candidates)["b.md#0"]["text"] == "beta only"
    assert [(r["path"], r["chunk_index"]) for r in view.scan("path = 'a.md'")] == [("a.md", 0), ("a.md", 1), ("a.md", 2)]
    assert view.neighbours([("a.md", 1)], 1) == {("a.md", 0): "alpha first", ("a.md", 1): "alpha second",
                                                 ("a.md", 2): "alpha third"}


def test_the_vector_index_is_built_when_large_and_rebuilt_when_it_has_grown_fourfold(store, monkeypatch):
    import mcp_kb.index.store as store_module

    monkeypatch.setattr(store_module, "VECTOR_INDEX_MIN_ROWS", 300)
    monkeypatch.setattr(store_module, "ROWS_PER_PARTITION", 100)
    generation = new_generation()
    store.create_generation("docs", generation, chunk_schema(DIM, {}))
    rng = np.random.default_rng(0)

    def grow_to(rows: int) -> list[str]:
        have = store.count_chunks("docs", generation)
        vectors = rng.normal(size=(rows - have, DIM)).tolist()
        batch = [_row(f"d{have + i}.md", 0, f"text {have + i}", vector) for i, vector in enumerate(vectors)]
        store.replace_documents("docs", generation, [r["path"] for r in batch],
                                pa.Table.from_pylist(batch, schema=store.chunk_table("docs", generation).schema))
        state = store.refresh_indexes("docs", generation, changed=True)
        return state, sorted(i.name for i in store.chunk_table("docs", generation).list_indices() if i.columns == ["vector"])

    assert grow_to(250) == ("full-text + exact vector search", [])
    assert grow_to(350) == ("full-text + HNSW vector index", ["vector_p3"])
    assert grow_to(1100)[1] == ["vector_p3"]  # 11 partitions wanted: not yet 4× the 3 it has
    assert grow_to(1250)[1] == ["vector_p12"]  # 4×: rebuilt, the old index dropped
    # A rebuild cut short after its index was in but before the old one was dropped: the next refresh
    # keeps the newest and drops the other.
    from lancedb.index import HnswSq
    table = store.chunk_table("docs", generation)
    table.create_index("vector", config=HnswSq(distance_type="cosine", num_partitions=3), name="vector_p3")
    assert grow_to(1260)[1] == ["vector_p12"]
    store.write_state("docs", {"generation": generation})
    view = store.view("docs", generation)
    assert len(view.nearest(np.asarray([1, 0, 0, 0], dtype=np.float32), None, 10)) == 10
