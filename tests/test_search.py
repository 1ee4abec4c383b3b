from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from helpers import write

from mcp_kb.errors import ModelError, SearchError
from mcp_kb.api import SearchRequest, SyncRequest
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.app import App
from mcp_kb.index.contract import ChunkView
from mcp_kb.records import Pinned
from mcp_kb.index.store import LanceStore
from mcp_kb.models.base import Embedder, ModelIdentity, Reranker
from mcp_kb.search import SearchResult

DOCS = {
    "leave.md": """---
doc_type: policy
year: 2024
tags: [hr, leave]
---
# Leave policy

## Annual leave

### How to apply

Employees apply for annual leave in the HR portal at least two weeks ahead. Your manager approves it,
and the days are deducted from your yearly allowance. Unused days carry over until the end of March.

## 2024年年假申请流程

员工需要提前两周在人事系统中提交年假申请，经直属经理审批后生效。
""",
    "errors.md": """---
doc_type: reference
year: 2021
tags: [api]
---
# Error codes

## Authentication

E5021: the access token expired. Request a new token from the auth service and retry.

## Client SDK

Call getUserInfo to read the profile; use snake_case_names for every field. Endpoints live under API-V2.1.
""",
    "stack.md": """---
doc_type: guide
year: 2023
---
# 前端开发

我们使用TypeScript开发所有前端项目，并用严格模式编译。
""",
    "travel.md": """---
doc_type: policy
year: 2019
---
# Travel

## Booking trips

Book flights through the travel desk; economy class for trips shorter than six hours.
""",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> App:
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    root = tmp_path_factory.mktemp("search")
    for name, text in DOCS.items():
        write(root / "docs" / name, text)
    config = build_config(
        {
            "storage": str(root / "index"),
            "kb": [
                {
                    "name": "docs",
                    "description": "d",
                    "paths": [str(root / "docs")],
                    "filterable": {
                        "doc_type": {"type": "string"},
                        "year": {"type": "integer"},
                        "tags": {"type": "string[]"},
                    },
                }
            ],
        },
        root,
        None,
    )
    app = App(config, embedder=embedder)
    app.sync()
    return app


def _sources(result: SearchResult) -> list[str]:
    return [hit.source for hit in result.hits]


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_each_mode_finds_the_leave_policy(app: App, mode: str) -> None:
    result = app.search("docs", SearchRequest(query="how do employees apply for annual leave", mode=mode, top_k=3))
    assert result.mode == mode
    assert result.hits[0].source == "leave.md"
    assert result.hits[0].heading == "Leave policy › Annual leave › How to apply"


def test_vector_finds_a_paraphrase_keyword_misses(app: App) -> None:
    query = "reserving aeroplane tickets for business journeys"
    assert _sources(app.search("docs", SearchRequest(query=query, mode="vector", top_k=1))) == ["travel.md"]


@pytest.mark.parametrize("query", ["E5021", "getUserInfo", "snake_case_names", "API-V2.1"])
def test_keyword_finds_exact_technical_tokens(app: App, query: str) -> None:
    assert _sources(app.search("docs", SearchRequest(query=query, mode="keyword", top_k=1))) == ["errors.md"]


def test_keyword_finds_chinese_word_inside_a_sentence(app: App) -> None:
    hit = app.search("docs", SearchRequest(query="年假", mode="keyword", top_k=1)).hits[0]
    assert hit.source == "leave.md" and "年假申请" in hit.text


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_chinese_query_whose_words_are_absent_finds_the_passage_by_its_characters_and_says_so(
    app: App, mode: str
) -> None:
    # 请假 ("ask for leave") is nowhere in the KB; 年假申请 shares its characters
    partial = app.search("docs", SearchRequest(query="请假", mode=mode, top_k=1))
    assert _sources(partial) == ["leave.md"]
    assert any("keyword matches are partial" in note and "请假" in note for note in partial.notes)
    assert not app.search(
        "docs", SearchRequest(query="年假申请", mode=mode, top_k=1)
    ).notes  # a word that is there: no note


def test_keyword_finds_english_word_inside_chinese(app: App) -> None:
    assert _sources(app.search("docs", SearchRequest(query="TypeScript", mode="keyword", top_k=1))) == ["stack.md"]


def test_hybrid_reports_both_ranks(app: App) -> None:
    hit = app.search("docs", SearchRequest(query="access token expired E5021", mode="hybrid", top_k=1)).hits[0]
    assert hit.source == "errors.md" and hit.vector_rank and hit.keyword_rank
    assert 0 < hit.score <= 1


def test_hybrid_never_scores_a_passage_found_on_one_side_as_zero(app: App) -> None:
    """Min-max put the last candidate at 0.000 whatever it matched; now each side's part stays."""
    hits = app.search(
        "docs", SearchRequest(query="annual leave request", mode="hybrid", top_k=20, max_per_document=20)
    ).hits
    assert len(hits) >= 4
    assert all(hit.score > 0.02 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_fused_scores_keep_each_sides_evidence() -> None:
    from mcp_kb.index.contract import Candidate
    from mcp_kb.search import VECTOR_SHARE, fuse

    vector = [Candidate("a", 0.9, 1), Candidate("b", 0.5, 2), Candidate("c", 0.2, 3)]
    keyword = [Candidate("c", 10.0, 3), Candidate("d", 2.0, 4)]
    scores = {c.id: c.score for c in fuse(vector, keyword, vector_weight=1.0)}
    assert scores["a"] == pytest.approx(VECTOR_SHARE)  # best vector, no keyword match
    assert scores["d"] == pytest.approx((1 - VECTOR_SHARE) * 0.2)  # a fifth of the best BM25
    assert 0 < scores["c"] - (1 - VECTOR_SHARE) < 0.1  # best keyword, last vector candidate: not 0
    assert scores["c"] > scores["a"] > scores["b"] > scores["d"] > 0


def test_hybrid_keeps_chinese_keyword_quality_with_an_english_model(app: App) -> None:
    # The offline model cannot read Chinese: its vote must not push the keyword match down.
    assert _sources(app.search("docs", SearchRequest(query="年假申请", mode="hybrid", top_k=1))) == ["leave.md"]


def test_filter_mode_lists_chunks_by_metadata_without_a_query(app: App) -> None:
    result = app.search("docs", SearchRequest(query="", mode="filter", filters={"doc_type": "policy"}, top_k=50))
    assert sorted(set(_sources(result))) == ["leave.md", "travel.md"]
    every = app.search("docs", SearchRequest(query="", mode="filter", filters={"path": "leave.md"}, top_k=50))
    assert [h.chunk_index for h in every.hits] == list(range(len(every.hits)))


def test_filters_restrict_similarity_search(app: App) -> None:
    result = app.search(
        "docs",
        SearchRequest(query="policy", mode="hybrid", filters={"year": {"gte": 2020}, "doc_type": ["policy", "guide"]}),
    )
    assert set(_sources(result)) <= {"leave.md", "stack.md"} and result.hits
    assert _sources(app.search("docs", SearchRequest(query="token", mode="keyword", filters={"tags": "api"}))) == [
        "errors.md"
    ]
    globbed = _sources(app.search("docs", SearchRequest(query="leave", filters={"path": {"glob": "*.md"}})))
    assert globbed and set(globbed) <= set(DOCS)
    assert _sources(app.search("docs", SearchRequest(query="leave", filters={"path": {"glob": "*.txt"}}))) == []


def test_injection_string_matches_nothing(app: App) -> None:
    result = app.search("docs", SearchRequest(query="leave", filters={"doc_type": "x' OR 1=1 --"}))
    assert result.hits == []


def test_unknown_filter_field_lists_valid_fields(app: App) -> None:
    with pytest.raises(
        SearchError, match="valid fields: chunk_index, doc_type, heading, page, path, tags, title, year"
    ):
        app.search("docs", SearchRequest(query="leave", filters={"colour": "red"}))


def test_static_filter_is_and_merged_with_the_callers(app: App) -> None:
    from mcp_kb.search import SearchModels, Searcher

    kb = app.config.kb[0].model_copy(
        update={"search": app.config.kb[0].search.model_copy(update={"filter": {"doc_type": "policy"}})}
    )
    searcher = Searcher(app.store, SearchModels(app.embedder, app.tokenizer))
    both = searcher.search(
        kb, SearchRequest(query="leave trips", mode="keyword", filters={"year": {"lt": 2020}}).resolved(kb.search)
    )
    assert _sources(both) == ["travel.md"]  # leave.md is a policy too, but from 2024
    assert (
        searcher.search(kb, SearchRequest(query="E5021", mode="keyword").resolved(kb.search)).hits == []
    )  # a reference, not a policy


def test_min_score_cuts_weak_hits(app: App) -> None:
    everything = app.search("docs", SearchRequest(query="annual leave", mode="vector", top_k=10))
    cut = everything.hits[1].score
    kept = app.search("docs", SearchRequest(query="annual leave", mode="vector", top_k=10, min_score=cut))
    assert len(kept.hits) == 2 and all(h.score >= cut for h in kept.hits)


def test_empty_query_is_refused(app: App) -> None:
    with pytest.raises(SearchError, match="query is empty"):
        app.search("docs", SearchRequest(query="   "))


def test_context_adds_neighbouring_chunks(app: App) -> None:
    first = app.search("docs", SearchRequest(query="E5021", mode="keyword", top_k=1, context=1)).hits[0]
    assert (first.source, first.chunk_index, first.context_before) == ("errors.md", 0, "")
    assert "getUserInfo" in first.context_after  # the next chunk: Client SDK
    last = app.search("docs", SearchRequest(query="getUserInfo", mode="keyword", top_k=1, context=1)).hits[0]
    assert last.chunk_index == 1 and "E5021" in last.context_before and last.context_after == ""


class _BrokenEmbedder:
    """Stands in for the index's model failing at query time (the degradation path)."""

    calls = 0

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity

    def known_identity(self) -> ModelIdentity:  # as Embedder's: the model is known, only running it fails
        return self.identity

    def embed_query(self, text: str) -> None:
        raise ModelError("model file unreadable")


def test_failing_embedder_degrades_to_keyword_and_says_so(app: App) -> None:
    from mcp_kb.search import SearchModels, Searcher

    kb = app.config.kb[0]
    searcher = Searcher(app.store, SearchModels(cast(Embedder, _BrokenEmbedder(app.embedder.identity)), app.tokenizer))
    result = searcher.search(kb, SearchRequest(query="E5021", mode="hybrid").resolved(kb.search))
    assert result.mode == "keyword" and result.hits[0].source == "errors.md"
    assert "vector search unavailable" in result.notes[0]


def test_results_are_cached_until_a_sync_changes_the_table(make_app: MakeApp, tmp_path: Path) -> None:
    for name, text in DOCS.items():
        write(tmp_path / "docs" / name, text)
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})  # its own: it edits a file
    app.sync()
    first = app.search("docs", SearchRequest(query="booking flights"))
    assert app.search("docs", SearchRequest(query="booking flights")).cached
    write(tmp_path / "docs" / "travel.md", DOCS["travel.md"].replace("economy", "premium economy"))
    app.sync()
    after = app.search("docs", SearchRequest(query="booking flights"))
    assert not after.cached and "premium economy" in after.hits[0].text and first.hits


class _ReversingReranker:
    """A stand-in cross-encoder (none can be downloaded here): scores by reversed order."""

    def score(self, query: str, passages: list[str]) -> list[float]:
        return [float(i) for i in range(len(passages))]


def test_reranker_reorders_the_fused_candidates(app: App) -> None:
    from mcp_kb.search import SearchModels, Searcher

    kb = app.config.kb[0]
    plain = Searcher(app.store, SearchModels(app.embedder, app.tokenizer))
    reranked = Searcher(
        app.store, SearchModels(app.embedder, app.tokenizer, cast(Reranker, _ReversingReranker()), rerank_candidates=3)
    )
    order = _sources(plain.search(kb, SearchRequest(query="leave policy", mode="keyword", top_k=3).resolved(kb.search)))
    again = _sources(
        reranked.search(kb, SearchRequest(query="leave policy", mode="keyword", top_k=3).resolved(kb.search))
    )
    assert again == list(reversed(order))


def test_unloadable_reranker_model_gives_a_clear_error(tmp_path: Path) -> None:
    from mcp_kb.settings import FastembedRerankSettings
    from mcp_kb.models.fastembed_rerank import FastEmbedReranker

    reranker = FastEmbedReranker(FastembedRerankSettings(enabled=True, model_path=str(tmp_path)))
    with pytest.raises(ModelError, match="has no model.onnx.*set \\[rerank\\] enabled = false"):
        reranker.score("q", ["p"])


def test_vector_scores_mean_the_same_with_the_ann_index(
    tmp_path: Path, embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the HNSW-SQ index LanceDB reports twice the cosine distance; scores must not change."""
    import numpy as np

    from mcp_kb.index import store
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    for i in range(60):
        write(
            tmp_path / "docs" / f"n{i}.md", f"# Note {i}\n\nA note about topic {i} and the weather in month {i % 12}.\n"
        )
    config = build_config(
        {
            "storage": str(tmp_path / "index"),
            "kb": [{"name": "notes", "description": "d", "paths": [str(tmp_path / "docs")]}],
        },
        tmp_path,
        None,
    )
    app = App(config, embedder=embedder)
    app.sync()
    exact = app.search("notes", SearchRequest(query="weather in month 3", mode="vector", top_k=5))
    monkeypatch.setattr(store, "VECTOR_INDEX_MIN_ROWS", 50)
    write(tmp_path / "docs" / "extra.md", "# Extra\n\nOne more note so the sync builds the vector index.\n")
    assert "HNSW" in app.sync()[0].index_state
    indexed = app.search("notes", SearchRequest(query="weather in month 3", mode="vector", top_k=5))
    assert [h.source for h in indexed.hits][:3] == [h.source for h in exact.hits][:3]
    assert np.allclose([h.score for h in indexed.hits][:3], [h.score for h in exact.hits][:3], atol=1e-5)
    assert all(0 < h.score <= 1 for h in indexed.hits)


def test_hybrid_shows_no_zero_weight_vector_guesses_for_unreadable_queries(app: App) -> None:
    # The English-only test model reads no Chinese: hybrid gives keyword matches only, not vector noise.
    result = app.search("docs", SearchRequest(query="年假申请", mode="hybrid", top_k=10))
    assert result.hits and all(h.keyword_rank for h in result.hits)


class _RebuildBeforeFirstRead:
    """A view whose first query lets a full rebuild (another App on the same index) land first."""

    def __init__(self, view: ChunkView | None, rebuild: Callable[[], object] | None) -> None:
        self._view, self._rebuild = view, rebuild

    def __getattr__(self, name: str) -> Any:
        if name in ("nearest", "keyword") and self._rebuild:
            rebuild, self._rebuild = self._rebuild, None
            rebuild()
        return getattr(self._view, name)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("dropped", ["before the search opens its table", "before its first query"])
def test_a_rebuild_that_drops_the_tables_under_a_search_is_answered_from_the_new_generation(
    make_app: MakeApp, tmp_path: Path, mode: str, dropped: str
) -> None:
    """The race a search in one process runs with a full rebuild in another (seen once in the crash harness as
    an empty answer), made to happen every time: the rebuild switches generations and drops the old tables
    between the search's read of the active generation and its reads of the tables."""
    for name, text in DOCS.items():
        write(tmp_path / "docs" / name, text)
    kb = {
        "name": "docs",
        "description": "d",
        "paths": [str(tmp_path / "docs")],
        "history": {"keep": 1, "keep_days": 0},
    }  # no version keeps the old generation: the rebuild drops it
    reader, writer = make_app(kb), make_app(kb)
    writer.sync()
    old = reader.store.active_generation("docs")
    open_view = reader.store.view

    def view_while_a_rebuild_lands(kb_name: str, generation: str, at: Pinned | None = None) -> ChunkView | None:
        if generation != old:
            return open_view(kb_name, generation, at)
        if dropped == "before the search opens its table":
            writer.sync(SyncRequest(full=True))
            return open_view(kb_name, generation)
        rebuilding = _RebuildBeforeFirstRead(
            open_view(kb_name, generation), lambda: writer.sync(SyncRequest(full=True))
        )
        return cast(ChunkView, rebuilding)  # a view that lets the rebuild land first

    reader.store.view = view_while_a_rebuild_lands  # type: ignore[method-assign,assignment]  # the race, made to happen
    result = reader.search("docs", SearchRequest(query="annual leave HR portal", mode=mode))
    assert isinstance(reader.store, LanceStore)
    assert reader.store.active_generation("docs") != old and not reader.store.chunk_table("docs", old)
    assert result.hits and result.hits[0].source == "leave.md" and not result.notes


def test_search_before_the_first_commit_answers_empty_with_the_note(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.index.state import sync_lock

    write(tmp_path / "fresh" / "a.md", "# A\n\ntext\n")
    app = make_app({"name": "fresh", "description": "d", "paths": [str(tmp_path / "fresh")]})
    with pytest.raises(SearchError, match="has not been synced yet"):
        app.search("fresh", SearchRequest(query="text"))
    with sync_lock(app.store, ["other"]):  # a sync of another KB of the index: this one is still unsynced
        with pytest.raises(SearchError, match="has not been synced yet"):
            app.search("fresh", SearchRequest(query="text"))
    with sync_lock(app.store, ["fresh"]):
        result = app.search("fresh", SearchRequest(query="text"))
    assert result.hits == [] and result.notes[0].startswith("indexing in progress; these results may be incomplete")


def test_a_degraded_answer_is_not_served_from_cache_once_the_model_is_back(app: App) -> None:
    from mcp_kb.search import SearchModels, Searcher

    kb = app.config.kb[0]
    searcher = Searcher(app.store, SearchModels(cast(Embedder, _BrokenEmbedder(app.embedder.identity)), app.tokenizer))
    request = SearchRequest(query="E5021 access token", mode="hybrid").resolved(kb.search)
    assert searcher.search(kb, request).mode == "keyword"
    searcher.embedder = app.embedder  # the model recovers
    again = searcher.search(kb, request)
    assert again.mode == "hybrid" and not again.cached and not again.notes


def test_searches_during_a_first_sync_say_the_index_is_incomplete_and_how_far_it_is(
    make_app: MakeApp, tmp_path: Path
) -> None:
    import threading

    for i in range(200):
        write(tmp_path / "many" / f"p{i:03d}.md", f"# Page {i}\n\nNotes on subject {i} for the planning team.\n")
    app = make_app({"name": "many", "description": "d", "paths": [str(tmp_path / "many")]})
    first_sync = threading.Thread(target=app.sync)
    first_sync.start()
    noted, answers = [], 0
    while first_sync.is_alive():
        try:
            result = app.search("many", SearchRequest(query="planning notes", mode="keyword"))
        except SearchError as exc:  # before the first commit (or before the sync took its lock): it says so
            assert "has not been synced yet" in str(exc)  # before the sync took its lock
            first_sync.join(0.02)  # let the sync run between tries
            continue
        first_sync.join(0.02)
        answers += 1
        noted += [note for note in result.notes if note.startswith("indexing in progress")]
        # Only an answer given once the sync has marked the index complete may come without the note.
        assert result.notes or app.store.read_state("many").complete, "an incomplete index must say so"
    first_sync.join()
    assert noted and " of 200 files indexed" in noted[-1]
    assert app.search("many", SearchRequest(query="planning notes", mode="keyword")).notes == []


def test_an_unfinished_first_sync_is_said_in_every_answer(
    make_app: MakeApp, tmp_path: Path, embedder: FastEmbedder
) -> None:
    write(tmp_path / "docs" / "a.md", "# A\n\nAlpha notes.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    real = embedder.embed_batch
    # Not a ModelError (that fails its files only): a crash the sync cannot get past.
    embedder.embed_batch = lambda texts: (_ for _ in ()).throw(MemoryError("out of memory"))  # type: ignore[method-assign]  # a crash mid-sync
    try:
        with pytest.raises(MemoryError):
            app.sync()
    finally:
        embedder.embed_batch = real  # type: ignore[method-assign]  # the model as it was
    result = app.search("docs", SearchRequest(query="alpha", mode="keyword"))
    assert result.hits == [] and "first sync of this knowledge base did not finish" in result.notes[0]
    from mcp_kb.index.state import sync_lock

    with sync_lock(app.store, ["docs"]):  # a sync has started but written no progress yet
        running = app.search("docs", SearchRequest(query="alpha", mode="keyword"))
    assert running.notes[0].startswith("indexing in progress; these results may be incomplete")


def test_a_kb_that_says_titles_count_ranks_a_title_match_above_body_matches(make_app: MakeApp, tmp_path: Path) -> None:
    write(
        tmp_path / "notes" / "operations.md",
        "# Operations notes\n\nUpgrade the cluster: upgrade the nodes "
        "first, then upgrade the control plane, and watch the upgrade.\n",
    )
    write(tmp_path / "notes" / "guide.md", "# Upgrade guide\n\nRead this before you start, on a quiet weekend.\n")
    kb = {"name": "notes", "description": "ops notes", "paths": [str(tmp_path / "notes")]}
    plain = make_app(kb)
    plain.sync()
    weighted = make_app({**kb, "search": {"title_weight": 3.0}})  # the same index: the weight is a query-time boost
    order = [hit.source for hit in plain.search("notes", SearchRequest(query="upgrade", mode="keyword")).hits]
    boosted = [hit.source for hit in weighted.search("notes", SearchRequest(query="upgrade", mode="keyword")).hits]
    assert order == ["operations.md", "guide.md"] and boosted == ["guide.md", "operations.md"]


def test_concurrent_searches_from_worker_threads_answer_as_one_at_a_time(make_app: MakeApp, tmp_path: Path) -> None:
    """A server answers searches in worker threads that share one result cache; with a cache of two and three
    queries, lookups keep meeting evictions."""
    from helpers import in_threads

    for name, text in DOCS.items():
        write(tmp_path / "docs" / name, text)
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    app.searcher._cache.size = 2
    queries = ["booking flights", "E5021 token expired", "annual leave"]
    expected = {query: [hit.source for hit in app.search("docs", SearchRequest(query=query)).hits] for query in queries}
    answers: list[tuple[str, list[str]]] = []

    def searches(offset: int) -> None:
        for n in range(60):
            query = queries[(n + offset) % len(queries)]
            answers.append((query, [hit.source for hit in app.search("docs", SearchRequest(query=query)).hits]))

    errors = in_threads(searches, 6)
    assert not errors, errors[:3]
    assert len(answers) == 360 and all(sources == expected[query] for query, sources in answers)
    assert len(app.searcher._cache) <= 2


def test_a_filter_on_a_field_declared_after_the_last_sync_says_to_sync_and_the_sync_adds_it(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """LanceDB answered "Schema error: No field named year" (a traceback in the CLI, a 500 on the page)."""
    write(tmp_path / "hr" / "leave.md", "---\nyear: 2024\n---\n# Leave\n\nAnnual leave is 25 days.\n")
    kb = {"name": "hr", "description": "HR", "paths": [str(tmp_path / "hr")]}
    make_app(kb).sync()
    declared = make_app({**kb, "filterable": {"year": {"type": "integer"}}})
    asked = SearchRequest(query="annual leave", filters={"year": {"gte": 2020}})
    with pytest.raises(
        SearchError,
        match=r"filter field 'year' is not in the index yet \(it was declared after the "
        r"last sync\); run `.*mcp-kb sync hr.*` .* to add it",
    ):
        declared.search("hr", asked)
    assert declared.search("hr", SearchRequest(query="annual leave")).hits  # unfiltered searches go on
    declared.sync()
    assert [hit.source for hit in declared.search("hr", asked).hits] == ["leave.md"]


# ---- across knowledge bases ---------------------------------------------------------------------


@pytest.fixture
def two_kbs(make_app: MakeApp, tmp_path: Path) -> App:
    write(
        tmp_path / "hr" / "README.md",
        "---\nyear: 2024\n---\n# Leave\n\nAnnual leave is 25 days; apply in the portal.\n",
    )
    write(tmp_path / "hr" / "travel.md", "---\nyear: 2020\n---\n# Travel\n\nBook trains in second class.\n")
    write(tmp_path / "api" / "README.md", "# API\n\nError E5021 means the access token expired.\n")
    app = make_app(
        {
            "name": "hr",
            "description": "HR",
            "paths": [str(tmp_path / "hr")],
            "filterable": {"year": {"type": "integer"}},
        },
        {"name": "api", "description": "API", "paths": [str(tmp_path / "api")]},
        {"name": "empty", "description": "Never synced", "paths": [str(tmp_path / "api")]},
        {"name": "empty2", "description": "Never synced", "paths": [str(tmp_path / "api")]},
    )
    app.sync(SyncRequest(kb="hr"))
    app.sync(SyncRequest(kb="api"))
    return app


def test_a_search_across_kbs_ranks_them_together_and_names_each_hits_kb(two_kbs: App) -> None:
    result = two_kbs.search_across(["hr", "api"], SearchRequest(query="access token expired E5021"))
    assert (result.hits[0].kb, result.hits[0].source) == ("api", "README.md")
    assert {hit.kb for hit in result.hits} == {"hr", "api"}
    # one path in two KBs: two documents, never merged into one passage
    both = two_kbs.search_across(["hr", "api"], SearchRequest(mode="filter", filters={"path": "README.md"}, top_k=10))
    readmes = [hit for hit in both.hits if hit.source == "README.md"]
    assert sorted(hit.kb for hit in readmes) == ["api", "hr"] and all(hit.chunk_count == 1 for hit in readmes)
    alone = two_kbs.search("hr", SearchRequest(query="annual leave portal"))
    assert alone.hits[0].kb == "hr"


def test_a_search_across_kbs_filters_on_common_fields_and_leaves_out_unsynced_kbs(two_kbs: App) -> None:
    with pytest.raises(SearchError, match="unknown filter field 'year'.*fields all of them have"):
        two_kbs.search_across(["hr", "api"], SearchRequest(query="leave", filters={"year": 2024}))
    filtered = two_kbs.search_across(
        ["hr", "api"], SearchRequest(query="second class trains", filters={"path": {"prefix": "travel"}})
    )
    assert [(hit.kb, hit.source) for hit in filtered.hits] == [("hr", "travel.md")]
    with_empty = two_kbs.search_across(["hr", "empty"], SearchRequest(query="annual leave"))
    assert with_empty.hits and "empty: not synced yet, left out" in with_empty.notes
    with pytest.raises(SearchError, match="none of these knowledge bases has been synced"):
        two_kbs.search_across(["empty", "empty2"], SearchRequest(query="annual leave"))


def test_version_is_refused_on_a_kb_of_one_version(make_app: MakeApp, tmp_path: Path) -> None:
    write(tmp_path / "docs" / "a.md", "# A\n\nAlpha.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    with pytest.raises(
        SearchError,
        match="holds one version of its documents; `version` is for knowledge bases with \\[\\[kb.versions\\]\\]",
    ):
        app.search("docs", SearchRequest(query="alpha", version="1.0"))
