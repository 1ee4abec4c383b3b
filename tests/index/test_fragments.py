"""A cluster's writes (index/fragments.py): rows written as uncommitted fragments, made visible by one commit that
also removes the old chunks of the wave's documents (the Ray engine's tests check it end to end)."""

from pathlib import Path

import pyarrow as pa
import pytest
from helpers import chunk_table

from mcp_kb.index.contract import new_generation
from mcp_kb.index.store import LanceStore
from mcp_kb.schema import ChunkRow, chunk_schema

pytest.importorskip("lance", reason="a Ray sync's writes need pylance: pip install 'mcp-kb-server[ray]'")


def _rows(store: LanceStore, generation: str, *chunks: tuple[str, int, str]) -> pa.Table:
    rows = [
        ChunkRow(
            id=f"{path}#{index}",
            path=path,
            chunk_index=index,
            heading="H",
            title="T",
            page=None,
            line_start=1,
            line_end=2,
            text=text,
            search_text=text,
            field_text="t",
            content_hash=text,
            file_hash="f",
            n_tokens=1,
            parts="[]",
            vector=[1.0, 0.0, 0.0, 0.0],
        ).as_dict()
        for path, index, text in chunks
    ]
    return pa.Table.from_pylist(rows, schema=store.chunk_schema("docs", generation))


def _held(store: LanceStore, generation: str) -> list[tuple[str, str]]:
    return sorted((row["id"], row["text"]) for row in chunk_table(store, "docs", generation).to_arrow().to_pylist())


def test_a_wave_replaces_its_documents_in_one_commit_and_leaves_the_other_fragments_alone(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path / "index"))
    generation = new_generation()
    store.create_generation("docs", generation, chunk_schema(4, {}))
    table = chunk_table(store, "docs", generation)
    others = [(path, index, f"{path} {index}") for path in ("x.md", "y.md") for index in range(5)]
    # Three fragments: a.md's chunks in the first and the last, after other documents' rows; c.md's alone.
    table.add(_rows(store, generation, *others[:5], ("a.md", 0, "a old 0"), ("b.md", 0, "b old")))
    table.add(_rows(store, generation, ("c.md", 0, "c kept")))
    table.add(_rows(store, generation, *others[5:], ("a.md", 1, "a old 1")))
    table.add(_rows(store, generation, ("e.md", 0, "e gone")))  # a fragment the wave leaves empty
    before = _held(store, generation)
    untouched = chunk_table(store, "docs", generation).to_lance().get_fragments()[1].metadata  # c.md's alone

    written = [
        store.write_fragments("docs", generation, _rows(store, generation, ("a.md", 0, "a new"))),
        store.write_fragments("docs", generation, _rows(store, generation, ("d.md", 0, "d new"))),
    ]
    assert _held(store, generation) == before  # written, not committed: no reader sees them
    store.commit_fragments("docs", generation, ["a.md", "b.md", "d.md", "e.md"], written)  # b.md, e.md: no rows now

    assert _held(store, generation) == sorted(
        [
            ("a.md#0", "a new"),
            ("c.md#0", "c kept"),
            ("d.md#0", "d new"),
            *((f"{path}#{index}", text) for path, index, text in others),
        ]
    )
    dataset = chunk_table(store, "docs", generation).to_lance()
    assert untouched in [fragment.metadata for fragment in dataset.get_fragments()]  # no deletion file added
    assert len(dataset.get_fragments()) == 3 + 2  # e.md's fragment removed, the two written ones added


def test_a_wave_of_new_documents_deletes_nothing(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path / "index"))
    generation = new_generation()
    store.create_generation("docs", generation, chunk_schema(4, {}))
    chunk_table(store, "docs", generation).add(_rows(store, generation, ("a.md", 0, "a")))
    kept = [fragment.metadata for fragment in chunk_table(store, "docs", generation).to_lance().get_fragments()]
    written = [store.write_fragments("docs", generation, _rows(store, generation, ("b.md", 0, "b")))]
    store.commit_fragments("docs", generation, ["b.md"], written)
    dataset = chunk_table(store, "docs", generation).to_lance()
    assert [fragment.metadata for fragment in dataset.get_fragments()][:1] == kept
    assert _held(store, generation) == [("a.md#0", "a"), ("b.md#0", "b")]
