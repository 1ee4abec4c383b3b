"""The store contract (index/contract.py), one suite for every backend: a folder and an S3-compatible
server (moto, on 127.0.0.1). Another backend is proven by adding it to `BACKENDS`."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import named_holder

from mcp_kb.settings import StorageConfig
from mcp_kb.index import open_store
from mcp_kb.index.contract import FileRecord, SyncHolder, new_generation
from mcp_kb.records import HealthCheck, KBState, KBVersion, SyncProgress
from mcp_kb.schema import ChunkRow, ReadingRow, chunk_schema
from mcp_kb.index.contract import Store
from s3_server import S3Server

DIM = 4
BACKENDS = ["folder", "s3"]


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    from s3_server import serve_s3

    with serve_s3() as server:
        yield server


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> StorageConfig:
    """A fresh, empty location of the backend; readers check for new versions on every read."""
    if request.param == "folder":
        return StorageConfig(uri=str(tmp_path / "index"))
    server = request.getfixturevalue("s3_server")
    return StorageConfig(
        **server.storage(server.new_bucket()), read_consistency=0, read_cache_dir=str(tmp_path / "read-cache")
    )


@pytest.fixture
def store(storage: StorageConfig) -> Store:
    return open_store(storage)


def _row(path: str, index: int, text: str, vector: list[float], title: str = "") -> dict[str, Any]:
    title = title or f"T {path}"
    return ChunkRow(
        id=f"{path}#{index}",
        path=path,
        chunk_index=index,
        heading="H",
        title=title,
        page=None,
        line_start=1,
        line_end=2,
        text=text,
        search_text=f"{title} {text}".lower(),
        field_text=title.lower(),
        content_hash=f"h-{text}",
        file_hash="f",
        n_tokens=3,
        parts="[]",
        vector=vector,
    ).as_dict()


def _fill(store: Store, kb: str = "docs") -> str:
    generation = new_generation()
    store.create_generation(kb, generation, chunk_schema(DIM, {}))
    rows = [
        _row("a.md", 0, "alpha first", [1, 0, 0, 0]),
        _row("a.md", 1, "alpha second", [0.9, 0.1, 0, 0]),
        _row("a.md", 2, "alpha third", [0, 1, 0, 0]),
        _row("b.md", 0, "beta only", [0, 0, 1, 0]),
    ]
    store.replace_documents(
        kb, generation, ["a.md", "b.md"], pa.Table.from_pylist(rows, schema=store.chunk_schema(kb, generation))
    )
    store.write_state(kb, KBState(generation=generation))
    return generation


def test_the_state_row_names_the_active_generation_and_other_handles_see_a_switch(
    store: Store, storage: StorageConfig
) -> None:
    assert store.active_generation("docs") is None and store.chunk_schema("docs") is None
    first = _fill(store)
    other = open_store(storage)  # another process's handle
    assert other.active_generation("docs") == first and other.count_chunks("docs") == 4
    second = _fill(store)
    assert first != second and other.active_generation("docs") == second


def test_dropping_generations_keeps_what_is_asked_and_touches_no_other_kb(store: Store) -> None:
    old = _fill(store, "a")
    new = _fill(store, "a")
    _fill(store, "a__chunks__b")  # a KB whose name looks like a table of KB "a"
    assert store.drop_generations("a", keep={new}) == [old]
    assert store.chunk_schema("a", old) is None and store.count_chunks("a", new) == 4
    assert store.count_chunks("a__chunks__b") == 4


def test_replacing_documents_is_one_commit_that_removes_their_old_chunks(store: Store) -> None:
    generation = _fill(store)
    version = store.version("docs")
    table = pa.Table.from_pylist([_row("a.md", 0, "alpha rewritten", [1, 0, 0, 0])], schema=store.chunk_schema("docs"))
    store.replace_documents("docs", generation, ["a.md"], table)
    assert store.version("docs") == version + 1
    assert store.indexed_paths("docs", generation) == {"a.md", "b.md"} and store.count_chunks("docs") == 2
    assert store.delete_documents("docs", generation, ["a.md"]) == 1
    assert store.indexed_paths("docs", generation) == {"b.md"}


def test_writing_new_documents_is_one_commit_and_never_duplicates_chunks_a_crash_left(store: Store) -> None:
    """New paths are appended; a batch holding a path whose chunks a killed sync wrote before its
    manifest commit replaces them instead of adding a second copy."""
    generation = _fill(store)
    schema = store.chunk_schema("docs")
    version = store.version("docs")
    store.replace_documents(
        "docs", generation, ["c.md"], pa.Table.from_pylist([_row("c.md", 0, "gamma", [0, 0, 0, 1])], schema=schema)
    )
    assert store.version("docs") == version + 1 and store.count_chunks("docs") == 5
    again = [_row("c.md", 0, "gamma", [0, 0, 0, 1]), _row("d.md", 0, "delta", [0, 0, 1, 1])]
    store.replace_documents("docs", generation, ["c.md", "d.md"], pa.Table.from_pylist(again, schema=schema))
    assert store.count_chunks("docs") == 6 and store.indexed_paths("docs", generation) >= {"c.md", "d.md"}


def test_the_manifest_keeps_each_documents_record(store: Store) -> None:
    generation = _fill(store)
    records = [FileRecord("a.md", "ha", 10, 111, 3, "indexed"), FileRecord("c.md", "hc", 5, 222, 0, "failed", "bad")]
    store.write_files("docs", generation, records)
    assert store.read_files("docs") == {record.path: record for record in records}
    store.write_files("docs", generation, [FileRecord("a.md", "ha2", 11, 333, 2, "indexed")])
    store.delete_files("docs", generation, ["c.md"])
    assert list(store.read_files("docs", generation).values()) == [FileRecord("a.md", "ha2", 11, 333, 2, "indexed")]


def test_notes_and_state_round_trip_per_kb(store: Store) -> None:
    store.write_note("docs", HealthCheck(hit_rate={"hybrid": 0.9}))
    store.write_state("other", KBState({"text": "年假"}, generation="x"))
    assert store.read_note("docs", HealthCheck) == HealthCheck(hit_rate={"hybrid": 0.9})
    assert store.read_note("other", HealthCheck) is None and store.read_state("other").fingerprint("text") == "年假"


def test_vectors_are_found_by_content_hash_in_any_generation(store: Store) -> None:
    generation = _fill(store)
    found = store.vectors_by_content_hash("docs", generation, ["h-beta only", "h-missing"])
    assert list(found) == ["h-beta only"] and np.allclose(found["h-beta only"], [0, 0, 1, 0])


def test_nearest_scores_are_exact_cosines(store: Store) -> None:
    generation = _fill(store)
    view = store.view("docs", generation)
    assert view is not None
    query = np.asarray([1, 0.05, 0, 0], dtype=np.float32)
    found = view.nearest(query, None, depth=3)
    assert [c.id for c in found] == ["a.md#0", "a.md#1", "a.md#2"]
    expected = float(query @ np.asarray([0.9, 0.1, 0, 0]) / (np.linalg.norm(query) * np.linalg.norm([0.9, 0.1, 0, 0])))
    assert found[1].score == pytest.approx(expected, abs=1e-6) and found[0].vector_rank == 1
    assert [c.id for c in view.nearest(query, "path = 'b.md'", depth=3)] == ["b.md#0"]


def test_keyword_finds_terms_before_and_after_the_full_text_index_is_built(store: Store) -> None:
    generation = _fill(store)
    view = store.view("docs", generation)
    assert view is not None
    unindexed = view.keyword("alpha", None, depth=10)  # new rows are scanned until the index folds them in
    store.refresh_indexes("docs", generation, changed=True)
    indexed = view.keyword("alpha", None, depth=10)
    assert {c.id for c in indexed} == {c.id for c in unindexed} == {"a.md#0", "a.md#1", "a.md#2"}
    assert indexed[0].keyword_rank == 1 and view.keyword("gamma", None, depth=10) == []


def test_a_view_of_a_dropped_generation_fails_rather_than_finding_nothing(store: Store) -> None:
    """A reader whose generation a rebuild (another process) dropped must not mistake that for "no match": the
    searcher retries on the new generation only when the read fails."""
    generation = _fill(store)
    store.refresh_indexes("docs", generation, changed=True)
    view = store.view("docs", generation)
    assert view is not None
    assert view.keyword("alpha", None, depth=10)
    store.drop_generations("docs", keep=set())
    with pytest.raises(RuntimeError, match="Not found"):  # LanceDB's words for a table whose files are gone
        view.keyword("alpha", None, depth=10)
    with pytest.raises(RuntimeError, match="Not found"):
        view.keyword("alpha", "path = 'a.md'", depth=10, field_weight=1.0)


def test_a_field_weight_lifts_a_title_match_above_body_matches(store: Store) -> None:
    generation = new_generation()
    store.create_generation("docs", generation, chunk_schema(DIM, {}))
    rows = [
        _row(
            "body.md",
            0,
            "upgrade the cluster: upgrade nodes, then upgrade the control plane",
            [1, 0, 0, 0],
            title="Operations notes",
        ),
        _row("title.md", 0, "read this before you start on a weekend", [0, 1, 0, 0], title="Upgrade guide"),
    ]
    store.replace_documents(
        "docs",
        generation,
        ["body.md", "title.md"],
        pa.Table.from_pylist(rows, schema=store.chunk_schema("docs", generation)),
    )
    store.refresh_indexes("docs", generation, changed=True)
    view = store.view("docs", generation)
    assert view is not None
    assert [c.id for c in view.keyword("upgrade", None, depth=5)] == ["body.md#0", "title.md#0"]
    assert [c.id for c in view.keyword("upgrade", None, depth=5, field_weight=3.0)] == ["title.md#0", "body.md#0"]


def test_rows_scan_neighbours_samples_and_titles(store: Store) -> None:
    generation = _fill(store)
    view = store.view("docs", generation)
    assert view is not None
    candidates = view.nearest(np.asarray([0, 0, 1, 0], dtype=np.float32), None, depth=1)
    assert view.rows(candidates)["b.md#0"]["text"] == "beta only"
    assert [(r["path"], r["chunk_index"]) for r in view.scan("path = 'a.md'")] == [
        ("a.md", 0),
        ("a.md", 1),
        ("a.md", 2),
    ]
    assert view.neighbours([("a.md", 1)], 1) == {
        ("a.md", 0): "alpha first",
        ("a.md", 1): "alpha second",
        ("a.md", 2): "alpha third",
    }
    assert view.sample(2, seed=7) == view.sample(2, seed=7) and len(view.sample(10, seed=7)) == 4
    assert store.document_titles("docs", generation, 5) == ["T a.md", "T b.md"]


def test_one_writer_holds_the_lease_until_it_releases_or_its_lease_lapses(storage: StorageConfig) -> None:
    storage = storage.model_copy(update={"lease_seconds": 2})
    first, second = open_store(storage), open_store(storage)
    assert first.take_lease(SyncHolder("one", kbs=("docs",))) is None
    assert (
        named_holder(second.take_lease(SyncHolder("two"))).id == "one"
        and named_holder(second.lease_holder()).id == "one"
    )
    assert first.renew_lease("one", {"docs": SyncProgress(1, 2)})
    assert named_holder(second.lease_holder()).progress == {"docs": SyncProgress(1, 2)}
    first.release_lease("one")
    assert second.lease_holder() is None and second.take_lease(SyncHolder("two")) is None
    deadline = time.monotonic() + 30  # the lease lapses lease_seconds (2 s) after its last renewal
    while first.take_lease(SyncHolder("three")) is not None:
        assert time.monotonic() < deadline, "a lapsed lease was never taken over"
        time.sleep(0.2)
    assert not second.renew_lease("two", {})  # the one whose lease lapsed learns it lost


def test_write_chunks_leaves_out_only_the_document_whose_rows_do_not_fit(store: Store) -> None:
    generation = _fill(store)
    refused = store.write_chunks(
        "docs",
        generation,
        {
            "a.md": [_row("a.md", 0, "alpha again", [1, 0, 0, 0])],
            "b.md": [_row("b.md", 0, "beta, wrong width", [0, 0, 1])],  # 3 numbers for a 4-wide vector column
            "c.md": [_row("c.md", 0, "gamma new", [0, 0, 0, 1])],
        },
    )
    assert list(refused) == ["b.md"] and refused["b.md"].startswith("cannot store its chunks:")
    assert store.indexed_paths("docs", generation) == {"a.md", "c.md"}  # b.md's old chunk went too
    assert store.count_chunks("docs", generation) == 2


def _reading(path: str, text: str) -> ReadingRow:
    return ReadingRow(
        path=path,
        title=path,
        kind="md",
        size=len(text),
        mtime_ns=1,
        file_hash=f"f-{text}",
        synced_at="2026-12-01T00:00:00Z",
        pages=None,
        lines=1,
        tokens=2,
        chunks=1,
        text=text,
        outline="[]",
        page_numbers=[],
        page_starts=[],
        chunk_starts=[0],
        as_written=True,
    )


def test_a_version_pins_the_three_tables_reads_them_as_they_were_and_restores_them(
    store: Store, storage: StorageConfig
) -> None:
    """What history.py asks of a backend: the table versions now, reads at them (chunks, manifest, reading forms)
    while the tables move on, restoring them as new versions, and version records per KB; a generation a record
    pins is never dropped, and a forgotten record lets it go."""
    generation = _fill(store)
    store.write_files("docs", generation, [FileRecord("a.md", "ha", 10, 1, 3, "indexed")])
    store.write_readings("docs", generation, ["a.md"], [_reading("a.md", "alpha then")])
    pinned = store.pinned_now("docs", generation)
    store.delete_documents("docs", generation, ["a.md"])
    store.write_files("docs", generation, [FileRecord("a.md", "ha2", 11, 2, 1, "indexed")])
    store.write_readings("docs", generation, ["a.md"], [_reading("a.md", "alpha now")])
    reader = open_store(storage)  # another process
    then = reader.view("docs", generation, pinned)
    assert then is not None
    assert then.version == pinned.chunks and len(then.scan("path = 'a.md'")) == 3
    assert reader.read_files("docs", generation, pinned)["a.md"].file_hash == "ha"
    assert (reader.read_reading("docs", generation, "a.md", pinned) or {})["text"] == "alpha then"
    listing = reader.reading_listing("docs", generation, pinned)
    assert listing is not None and listing["path"].to_pylist() == ["a.md"]
    assert (reader.read_reading("docs", generation, "a.md") or {})["text"] == "alpha now"
    restored = store.restore("docs", generation, pinned)
    assert restored.chunks > pinned.chunks and store.count_chunks("docs") == 4
    assert store.read_files("docs")["a.md"].file_hash == "ha"
    assert (store.read_reading("docs", generation, "a.md") or {})["text"] == "alpha then"

    def version(number: int, started: str, *tags: str) -> KBVersion:
        return KBVersion(number, generation, pinned, started, started, "sync", tags=tags)

    store.write_version("docs", version(1, "2026-12-01T00:00:00Z", "年"))
    store.write_version("docs", version(2, "2026-12-02T00:00:00Z"))
    store.write_version("docs", version(1, "2026-12-01T00:00:00Z", "again"))
    store.write_version("other", version(1, "2026-12-03T00:00:00Z"))
    assert reader.read_versions("docs") == [
        version(1, "2026-12-01T00:00:00Z", "again"),
        version(2, "2026-12-02T00:00:00Z"),
    ]
    newer = _fill(store)
    assert store.drop_generations("docs", keep={newer}) == []  # the records pin the first generation
    store.forget_versions("docs", [1, 2])
    assert reader.read_versions("docs") == [] and len(reader.read_versions("other")) == 1
    assert store.drop_generations("docs", keep={newer}) == [generation]
