"""LanceStore beyond the contract (test_store_contract.py): its table names and its vector index."""

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import named_holder
from helpers import chunk_table

from mcp_kb.schema import ChunkRow, chunk_schema
from mcp_kb.index.contract import SyncHolder, new_generation
from mcp_kb.index.generations import chunk_table_name
from mcp_kb.index.store import LanceStore
from mcp_kb.records import KBState
from mcp_kb.index.views import LanceChunkView

DIM = 4


def _row(path: str, index: int, text: str, vector: list[float]) -> dict[str, Any]:
    return ChunkRow(
        id=f"{path}#{index}",
        path=path,
        chunk_index=index,
        heading="H",
        title="T",
        page=None,
        line_start=1,
        line_end=2,
        text=text,
        search_text=text.lower(),
        field_text="t",
        content_hash=f"h-{text}",
        file_hash="f",
        n_tokens=3,
        parts="[]",
        vector=vector,
    ).as_dict()


@pytest.fixture
def store(tmp_path: Path) -> LanceStore:
    return LanceStore(str(tmp_path / "index"))


def _fill(store: LanceStore, kb: str = "docs") -> str:
    generation = new_generation()
    store.create_generation(kb, generation, chunk_schema(DIM, {}))
    rows = [
        _row("a.md", 0, "alpha first", [1, 0, 0, 0]),
        _row("a.md", 1, "alpha second", [0.9, 0.1, 0, 0]),
        _row("a.md", 2, "alpha third", [0, 1, 0, 0]),
        _row("b.md", 0, "beta only", [0, 0, 1, 0]),
    ]
    table = pa.Table.from_pylist(rows, schema=store.chunk_schema(kb, generation))
    store.replace_documents(kb, generation, ["a.md", "b.md"], table)
    store.write_state(kb, KBState(generation=generation))
    return generation


def test_dropping_generations_keeps_what_is_asked_and_touches_no_other_kb(store: LanceStore) -> None:
    old = _fill(store, "a")
    new = _fill(store, "a")
    _fill(store, "a__chunks__b")  # a KB whose name looks like a table of KB "a"
    assert store.drop_generations("a", keep={new}) == [old]
    names = set(store.db.list_tables().tables)
    assert chunk_table_name("a", new) in names and chunk_table_name("a", old) not in names
    assert store.count_chunks("a__chunks__b") == 4


def test_a_reader_lets_go_of_the_generations_a_writer_elsewhere_dropped(store: LanceStore, tmp_path: Path) -> None:
    reader = LanceStore(str(tmp_path / "index"))
    old = _fill(store, "docs")
    _fill(store, "other")
    other = reader.active_generation("other")
    assert reader.view("docs", old) is not None and other and reader.view("other", other)
    new = _fill(store, "docs")  # a rebuild in another process: a new generation, the old one dropped
    store.drop_generations("docs", keep={new})
    view = reader.view("docs", new)
    assert view and view.version >= 1
    held = reader._tables.held()
    assert chunk_table_name("docs", old) not in held and chunk_table_name("docs", new) in held
    assert any(name.startswith("other__chunks__") for name in held)  # another KB's handles stay


def test_an_index_from_before_generations_reads_its_old_table_names() -> None:
    from mcp_kb.index.generations import file_table_name

    assert KBState.from_dict({"model": {"name": "m"}}).generation == "" and KBState().generation is None
    assert chunk_table_name("docs", "") == "docs__chunks" and file_table_name("docs", "") == "docs__files"


def test_the_vector_index_is_built_when_large_and_rebuilt_when_it_has_grown_fourfold(
    store: LanceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_kb.index.store as store_module
    import mcp_kb.index.vector_index as vector_index

    monkeypatch.setattr(store_module, "VECTOR_INDEX_MIN_ROWS", 300)
    monkeypatch.setattr(vector_index, "ROWS_PER_PARTITION", 100)
    generation = new_generation()
    store.create_generation("docs", generation, chunk_schema(DIM, {}))
    rng = np.random.default_rng(0)

    def grow_to(rows: int) -> tuple[str, list[str]]:
        have = store.count_chunks("docs", generation)
        vectors = rng.normal(size=(rows - have, DIM)).tolist()
        batch = [_row(f"d{have + i}.md", 0, f"text {have + i}", vector) for i, vector in enumerate(vectors)]
        store.replace_documents(
            "docs",
            generation,
            [r["path"] for r in batch],
            pa.Table.from_pylist(batch, schema=chunk_table(store, "docs", generation).schema),
        )
        state = store.refresh_indexes("docs", generation, changed=True)
        return state, sorted(
            i.name for i in chunk_table(store, "docs", generation).list_indices() if i.columns == ["vector"]
        )

    assert grow_to(250) == ("full-text + exact vector search", [])
    assert grow_to(350) == ("full-text + HNSW vector index", ["vector_p3"])
    assert grow_to(1100)[1] == ["vector_p3"]  # 11 partitions wanted: not yet 4× the 3 it has
    assert grow_to(1250)[1] == ["vector_p12"]  # 4×: rebuilt, the old index dropped
    # A rebuild cut short after its index was in but before the old one was dropped: the next refresh
    # keeps the newest and drops the other.
    from lancedb.index import HnswSq

    table = chunk_table(store, "docs", generation)
    table.create_index("vector", config=HnswSq(distance_type="cosine", num_partitions=3), name="vector_p3")
    assert grow_to(1260)[1] == ["vector_p12"]
    store.write_state("docs", KBState(generation=generation))
    view = store.view("docs", generation)
    assert view is not None
    assert len(view.nearest(np.asarray([1, 0, 0, 0], dtype=np.float32), None, 10)) == 10


def test_a_large_table_gets_an_ivf_pq_index_whose_refined_searches_keep_recall(
    store: LanceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PQ_INDEX_MIN_ROWS the index is IVF-PQ (codes of 8 dimensions: a sixth of HNSW-SQ's memory) and each
    query re-ranks refine-factor times its candidates by their full vectors: recall@10 against exact search."""
    import mcp_kb.index.store as store_module
    import mcp_kb.index.vector_index as vector_index

    monkeypatch.setattr(store_module, "VECTOR_INDEX_MIN_ROWS", 300)
    monkeypatch.setattr(vector_index, "ROWS_PER_PARTITION", 500)
    monkeypatch.setattr(vector_index, "PQ_INDEX_MIN_ROWS", 2_000)
    dimension, generation = 64, new_generation()
    store.create_generation("docs", generation, chunk_schema(dimension, {}))
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(40, dimension))  # topics, each with its passages near it
    vectors = centres[rng.integers(0, 40, 3_000)] + rng.normal(scale=0.35, size=(3_000, dimension))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def grow_to(rows: int) -> tuple[str, list[str]]:
        have = store.count_chunks("docs", generation)
        batch = [_row(f"d{i}.md", 0, f"text {i}", vectors[i].tolist()) for i in range(have, rows)]
        store.replace_documents(
            "docs",
            generation,
            [r["path"] for r in batch],
            pa.Table.from_pylist(batch, schema=chunk_table(store, "docs", generation).schema),
        )
        state = store.refresh_indexes("docs", generation, changed=True)
        return state, sorted(
            i.name for i in chunk_table(store, "docs", generation).list_indices() if i.columns == ["vector"]
        )

    assert grow_to(1_000) == ("full-text + HNSW vector index", ["vector_p2"])
    assert grow_to(3_000) == ("full-text + IVF-PQ vector index", ["vector_pq_p6"])  # past the threshold: rebuilt
    queries = vectors[rng.integers(0, 3_000, 30)] + rng.normal(scale=0.2, size=(30, dimension))

    def recall(view: LanceChunkView | None) -> float:
        assert view is not None
        found = [{c.id for c in view.nearest(q.astype(np.float32), None, 10)} for q in queries]
        exact = [{f"d{i}.md#0" for i in np.argsort(-(vectors @ q))[:10]} for q in queries]
        return float(np.mean([len(a & b) / 10 for a, b in zip(found, exact)]))

    refined = recall(store.view("docs", generation))
    query = queries[0].astype(np.float32)
    refined_view = store.view("docs", generation)
    assert refined_view is not None
    found = refined_view.nearest(query, None, 10)
    exact = {f"d{i}.md#0": float(vectors[i] @ query / np.linalg.norm(query)) for i in range(3_000)}
    assert [c.score for c in found] == pytest.approx([exact[c.id] for c in found], abs=1e-5)  # scores: exact cosine
    monkeypatch.setattr(vector_index, "PQ_REFINE_FACTOR", 1)  # the codes alone (a new store: it reads that again)
    assert refined >= 0.95 and refined > recall(LanceStore(store.uri).view("docs", generation)) + 0.1
    store.delete_documents("docs", generation, [f"d{i}.md" for i in range(1_500, 3_000)])
    assert store.refresh_indexes("docs", generation, changed=True) == "full-text + IVF-PQ vector index"  # kept


@pytest.mark.parametrize("first_use", ["lease", "state"])
def test_a_writer_that_loses_the_race_to_create_a_shared_table_uses_the_winners(tmp_path: Path, first_use: str) -> None:
    """On object storage two writers may both find no lease (or state) table and both create it: the loser's
    commit conflicts. Here the winner's creation lands inside the loser's call, which then fails as LanceDB's does."""
    winner, loser = LanceStore(str(tmp_path / "index")), LanceStore(str(tmp_path / "index"))
    real_create = loser.db.create_table

    def create_after_the_winner(name: str, **kwargs: Any) -> None:
        if first_use == "lease":
            winner.take_lease(SyncHolder("winner"))
        else:
            winner.write_state("docs", KBState(generation="abc"))
        real_create(name, **kwargs)  # the table is there now: exist_ok passes, so fail as a lost commit does
        raise RuntimeError(
            "lance error: Retryable commit conflict for version 2: This Overwrite transaction was "
            "preempted by concurrent transaction Overwrite at version 2. Please retry."
        )

    loser.db.create_table = create_after_the_winner  # type: ignore[method-assign,assignment]  # the loser's connection, made to lose
    if first_use == "lease":
        assert (
            named_holder(loser.take_lease(SyncHolder("loser"))).id == "winner"
        )  # it names the holder instead of failing
    else:
        loser.write_state("other", KBState(generation="def"))
        assert loser.read_state("docs").generation == "abc" and loser.read_state("other").generation == "def"


def test_a_table_whose_files_are_damaged_is_a_store_error_naming_the_index_not_a_lance_traceback(
    store: LanceStore, tmp_path: Path
) -> None:
    """A manifest overwritten (a bad disk, a half-copied backup): opening the table, for a sync or a search, says
    which index could not open a table; nothing reaches the user as a RuntimeError from Rust."""
    from mcp_kb.errors import StoreError

    generation = _fill(store)
    for manifest in (tmp_path / "index" / f"{chunk_table_name('docs', generation)}.lance" / "_versions").iterdir():
        manifest.write_bytes(b"garbage\n")
    fresh = LanceStore(str(tmp_path / "index"))  # no handle opened before the damage
    for reading in (lambda: fresh.chunk_schema("docs", generation), lambda: fresh.view("docs", generation)):
        with pytest.raises(StoreError, match=f"the index at {tmp_path / 'index'} could not open a table"):
            reading()
