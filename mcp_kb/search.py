"""Search one KB: vector, keyword (BM25), hybrid (score-aware fusion) and filter-only modes.

Scores by mode (what `min_score` is compared with):
- vector:  cosine similarity, -1..1 (useful cut-offs are around 0.3-0.5);
- keyword: BM25, 0..unbounded, comparable only within one KB;
- hybrid:  0..1, a mix of each side's scores normalized within this query's candidates
           (1 = best on both sides; a passage found on one side only keeps that side's part),
           so min_score is relative to the query's best matches;
- filter:  no similarity; every hit scores 1 and `min_score` is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from .settings import KBConfig
from .errors import ModelError, NotSyncedError, SearchError
from .index.filters import and_where, build_where
from .index.keywords import cjk_words, keyword_terms
from .index.state import sync_activity
from .ingest.sources import rooted_id_patterns
from .index.contract import Candidate, ChunkView, Store, view_of
from .lru import BoundedLRU
from .models.base import Embedder, Reranker, TokenCounter, query_model_differs
from .passages import Hit, add_context, assemble, fit_budget
from .records import KBState
from .requests import ResolvedSearch
from .stopwatch import stopwatch
from .vocabulary import status_uri, sync_remedy

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Share of the vector side in hybrid scores, chosen on the dev splits (benchmarks/fusion.py).
VECTOR_SHARE = 0.4
_VECTOR_FLOOR = 0.1  # the last vector candidate keeps 0.1 / 1.1 of its side (benchmarks/fusion.py)
_CACHE_SIZE = 256
_MAX_DEPTH = 1_000  # candidates per side when over-fetching for distinct passages


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    mode: str  # the mode that produced the hits (keyword when hybrid had to degrade)
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    degraded: bool = False  # keyword search because the vector side failed, or fused order as the reranker failed

    def as_dict(self) -> dict[str, Any]:
        """The JSON form every face gives (`search --json`, the search tools' structured content)."""
        return SearchOutput(results=list(self.hits), mode=self.mode, notes=self.notes).model_dump(mode="json")


class SearchOutput(BaseModel):
    """A search result's JSON form, whose schema the search tools declare as their output."""

    results: list[Hit]
    mode: str = Field(description="Mode that produced the results")
    notes: list[str] = Field(default_factory=list)


class Searcher:
    """Runs searches against a store; results are cached per table version."""

    def __init__(self, store: Store, embedder: Embedder, tokenizer: TokenCounter,
                 reranker: Reranker | None = None, rerank_candidates: int = 30):
        self.store = store
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self._cache: BoundedLRU[str, SearchResult] = BoundedLRU(_CACHE_SIZE)

    def search(self, kb: KBConfig, request: ResolvedSearch) -> SearchResult:
        generation = self.store.active_generation(kb.name)
        try:
            return self._search(kb, request, generation)
        except Exception:
            # A rebuild (maybe in another process) switched generations and dropped the tables this search
            # was reading, before or while it read them: answer from the new generation.
            if self.store.active_generation(kb.name) == generation:
                raise
            return self._search(kb, request, self.store.active_generation(kb.name))

    def _search(self, kb: KBConfig, request: ResolvedSearch, generation: str | None) -> SearchResult:
        view = view_of(self.store, kb.name, generation)
        if view is None:
            if generation is not None:
                raise SearchError(f"the index of knowledge base {kb.name!r} has lost its tables; "
                                  f"{sync_remedy(kb.name)} to rebuild it")
            if sync_activity(self.store, kb.name) is not None:  # nothing committed yet: an empty answer that says why
                return SearchResult([], request.mode, notes=self._incomplete_index_notes(kb.name))
            raise NotSyncedError(kb.name, self.store.uri)
        # Generation ids never repeat, so a rebuilt index never meets the answers of the old one.
        key = request.cache_key(kb.name, view.generation, view.version)
        cached = self._cache.get(key)
        if cached is not None:
            return replace(cached, cached=True)
        types, rooted = kb.filter_field_types(), rooted_id_patterns()
        where = and_where(build_where(kb.search.filter, types, rooted), build_where(request.filters, types, rooted))
        state = KBState(self.store.read_state(kb.name))
        result = self._run(kb, view, request, where, state.model)
        result.notes.extend(self._incomplete_index_notes(kb.name, state))
        if not result.notes:  # a degraded answer (model down, index missing) must not outlive the cause
            self._cache.put(key, result)
        return result

    @staticmethod
    def _vector_refusal(kb: str, differs: str) -> str:
        return (f"vector search is off: {differs}; answered from keyword search ({sync_remedy(kb)} to rebuild the "
                f"index with this model, or see the server's log for why the index's model is not in use)")

    def _incomplete_index_notes(self, kb: str, state: KBState | None = None) -> list[str]:
        """Until a KB's first sync has finished, every answer says the index is incomplete, and how far it is."""
        if (state or KBState(self.store.read_state(kb))).complete:
            return []
        progress = sync_activity(self.store, kb)  # written per batch; not yet at the very start
        if progress is not None and not progress.counted and KBState(self.store.read_state(kb)).complete:
            return []  # it finished between the two reads: its record is gone, its lock not yet
        if progress is not None:
            done = f" ({progress.text()})" if progress.counted else ""
            return [f"indexing in progress{done}; these results may be incomplete, search again when it is done "
                    f"({status_uri(kb)})"]
        return [f"the first sync of this knowledge base did not finish; results may be incomplete "
                f"({sync_remedy(kb)})"]

    def _run(self, kb: KBConfig, view: ChunkView, request: ResolvedSearch, where: str | None,
             indexed_model: dict[str, Any] | None) -> SearchResult:
        timings: dict[str, float] = {}
        if request.mode == "filter":
            if not where:
                raise SearchError("mode 'filter' needs filters, e.g. {\"path\": \"docs/leave.md\"}")
            rows = _timed(timings, "filter", lambda: view.scan(where))  # in document order
            mode, notes, rerank_failed = "filter", list[str](), False
            hits = assemble((_hit(row, 1.0) for row in rows), request.top_k, max_per_document=None)
        else:
            mode, hits, notes, rerank_failed = self._passages(kb, view, request, where, timings, indexed_model)
            notes.extend(_partial_match_notes(request.query, hits) if mode != "vector" else [])
        if request.context and hits:
            spots = [(h.source, i) for h in hits for i in (h.chunk_index, h.last_chunk_index)]
            hits = _timed(timings, "context",
                          lambda: add_context(hits, view.neighbours(spots, request.context), request.context))
        hits, left_out = _timed(timings, "budget",
                                lambda: fit_budget(hits, request.max_tokens, self.tokenizer, request.query))
        return SearchResult(hits, mode, notes + left_out, timings, degraded=mode != request.mode or rerank_failed)

    def _passages(self, kb: KBConfig, view: ChunkView, request: ResolvedSearch, where: str | None,  # noqa: PLR0913  # one search's state
                  timings: dict[str, float],
                  indexed_model: dict[str, Any] | None) -> tuple[str, list[Hit], list[str], bool]:
        """`top_k` distinct passages (and whether the reranker failed): when the candidates run out first (e.g.
        all from one document over its cap) and a side had more to give, ask both sides for four times as many."""
        depth = max(kb.search.candidates, request.top_k, self.rerank_candidates if self.reranker else 0)
        while True:
            notes: list[str] = []
            rerank_failed = False
            ranked: Iterable[Hit]  # the reranker's list, or hits read batch by batch until enough pass
            mode, candidates, more = self._candidates(kb, view, request, where, depth, timings, notes, indexed_model)
            if self.reranker:
                shortlist = candidates[:self.rerank_candidates]
                fetched = _timed(timings, "fetch", lambda: _hits(view.rows(shortlist), shortlist))
                if fetched:
                    reranked = _timed(timings, "rerank", lambda: self._rerank(kb.name, request.query, fetched, notes))
                    fetched, rerank_failed = reranked or fetched, reranked is None
                ranked = fetched
                more = False  # cross-encoder scores cannot be mixed with fused ones further down
            else:
                ranked = _hits_in_batches(view, candidates, batch=max(2 * request.top_k, 10))
            above = (hit for hit in ranked if hit.score >= request.min_score)
            passages = _timed(timings, "assemble",
                              lambda: assemble(above, request.top_k, request.max_per_document))
            if len(passages) == request.top_k or not more or depth >= _MAX_DEPTH:
                return mode, passages, notes, rerank_failed
            depth = min(depth * 4, _MAX_DEPTH)

    # ---- the two sides ---------------------------------------------------------------------
    def _candidates(self, kb: KBConfig, view: ChunkView, request: ResolvedSearch, where: str | None, depth: int,  # noqa: PLR0913  # one search's state
                    timings: dict[str, float], notes: list[str],
                    indexed_model: dict[str, Any] | None) -> tuple[str, list[Candidate], bool]:
        """Ranked chunk ids with scores, and whether a side stopped at `depth` (it may have more).
        Sides run one after the other: on two cores, running them in parallel was slower (hybrid p50
        44.6 ms vs 36 ms at 100k chunks), as LanceDB uses both."""
        mode = request.mode
        vector_weight = self.vector_weight(request.query) if mode == "hybrid" else 1.0
        vector: list[Candidate] = []
        if mode == "vector" or (mode == "hybrid" and vector_weight > 0):  # no vote, no vector search
            try:
                query_vector = _timed(timings, "embed", lambda: self.embedder.embed_query(request.query))
                # after the embedding: a service's model is known from its answer, with no request of its own
                differs = query_model_differs(self.embedder, indexed_model)
                if differs:
                    notes.append(self._vector_refusal(kb.name, differs))
                    mode = "keyword"
                else:
                    vector = _timed(timings, "vector", lambda: view.nearest(query_vector, where, depth))
            except ModelError as exc:
                notes.append(f"vector search unavailable ({exc}); answered from keyword search")
                log.warning("%s: %s", kb.name, notes[-1])
                mode = "keyword"
        keyword: list[Candidate] = []
        if mode in ("keyword", "hybrid"):
            keyword = _timed(timings, "keyword",
                             lambda: self._keyword(view, request.query, where, depth, kb.search.title_weight))
        more = depth in (len(vector), len(keyword))
        if mode == "hybrid":
            return mode, fuse(vector, keyword, vector_weight), more
        return mode, vector or keyword, more

    @staticmethod
    def _keyword(view: ChunkView, query: str, where: str | None, depth: int, title_weight: float) -> list[Candidate]:
        terms = keyword_terms(query)
        return view.keyword(terms, where, depth, title_weight) if terms else []

    # ---- fusion and reranking -------------------------------------------------------------
    def vector_weight(self, query: str) -> float:
        """How much to trust the vector side for this query, 0..1.

        An embedding model that cannot read the query (e.g. Chinese for an English-only model,
        seen as [UNK] tokens) gives near-random neighbours: its vote then counts for little.
        """
        unknown = self.tokenizer.unknown_share(query)
        return max(0.0, 1.0 - 4.0 * unknown)

    def _rerank(self, kb: str, query: str, hits: list[Hit], notes: list[str]) -> list[Hit] | None:
        """The hits in the reranker's order; None, with a note, when it fails (the fused order stands)."""
        assert self.reranker is not None  # asked only when one is configured
        try:
            scores = self.reranker.score(query, [h.text for h in hits])
        except ModelError as exc:
            notes.append(f"reranking unavailable ({exc}); passages in the fused order")
            log.warning("%s: %s", kb, notes[-1])
            return None
        ranked = sorted(zip(scores, hits), key=lambda pair: pair[0], reverse=True)
        return [replace(hit, score=float(score)) for score, hit in ranked]


def _partial_match_notes(query: str, hits: list[Hit]) -> list[str]:
    """Says so when no passage holds any two-character CJK word of the query: the keyword side then matched
    single characters only, weaker evidence than a word (a query 请假 meeting 年假申请)."""
    words = cjk_words(query)
    if not words or not hits or any(w in f"{h.title}\n{h.heading}\n{h.text}" for h in hits for w in words):
        return []
    shown = "、".join(dict.fromkeys(words[:3]))
    return [f"no passage contains a word of the query as written ({shown}); keyword matches are partial "
            f"(single characters)"]


def fuse(vector: list[Candidate], keyword: list[Candidate], vector_weight: float) -> list[Candidate]:
    """Score-aware fusion: a convex mix of each side's normalized scores.

    Keyword scores are divided by the query's best BM25 (0 still means "no keyword match"); vector
    scores are placed on the query's candidate range with a floor a tenth of the range below the
    last candidate, so a passage found on one side only never reads as worthless (min-max gave it 0).
    On SciFact (train) this scored nDCG@10 0.737, min-max 0.736, reciprocal-rank fusion 0.722
    (benchmarks/fusion.py); it also keeps a flat, uninformative side from displacing a sharp keyword
    match. The vector share is VECTOR_SHARE scaled by how well the model reads the query.
    """
    alpha = VECTOR_SHARE * vector_weight
    vector_scores = _normalized({c.id: c.score for c in vector}, floor=_VECTOR_FLOOR)
    keyword_scores = _normalized({c.id: c.score for c in keyword}, floor=None)
    by_vector = {c.id: c for c in vector}
    by_keyword = {c.id: c for c in keyword}
    fused = []
    for chunk in {**by_keyword, **by_vector}:
        score = alpha * vector_scores.get(chunk, 0.0) + (1 - alpha) * keyword_scores.get(chunk, 0.0)
        from_vector, from_keyword = by_vector.get(chunk), by_keyword.get(chunk)
        found = from_vector or by_keyword[chunk]  # every chunk comes from one side at least
        fused.append(Candidate(chunk, score, found.row_id,
                               vector_rank=from_vector.vector_rank if from_vector else None,
                               keyword_rank=from_keyword.keyword_rank if from_keyword else None))
    return sorted(fused, key=lambda c: c.score, reverse=True)


def _normalized(scores: dict[str, float], floor: float | None) -> dict[str, float]:
    """Scores to 0..1 within one query's candidates: divided by the best (floor None), or placed
    between the best (1) and a floor `floor` times the range below the worst; a flat list scores 1."""
    if not scores:
        return {}
    high = max(scores.values())
    low = 0.0 if floor is None else min(scores.values())
    low -= (high - low) * (floor or 0.0)
    return {key: (value - low) / (high - low) if high > low else 1.0 for key, value in scores.items()}


def _hits(row_by_id: dict[str, dict[str, Any]], candidates: list[Candidate]) -> list[Hit]:
    return [_hit(row_by_id[c.id], c.score, vector_rank=c.vector_rank, keyword_rank=c.keyword_rank)
            for c in candidates if c.id in row_by_id]


def _hits_in_batches(view: ChunkView, candidates: list[Candidate], batch: int) -> Iterator[Hit]:
    """The candidates' rows, read a batch at a time as assembly asks for more."""
    for start in range(0, len(candidates), batch):
        part = candidates[start:start + batch]
        yield from _hits(view.rows(part), part)


def _hit(row: dict[str, Any], score: float, vector_rank: int | None = None, keyword_rank: int | None = None) -> Hit:
    return Hit(text=row["text"], source=row["path"], title=row["title"] or "", heading=row["heading"] or "",
               page=row["page"], chunk_index=row["chunk_index"], score=round(float(score), 6),
               line_start=row["line_start"], line_end=row["line_end"], vector_rank=vector_rank,
               keyword_rank=keyword_rank)


def _timed(timings: dict[str, float], stage: str, work: Callable[[], _T]) -> _T:
    """`work()`, its milliseconds kept in `timings` under `stage`."""
    with stopwatch(lambda seconds: timings.__setitem__(stage, round(seconds * 1000, 2))):
        return work()

