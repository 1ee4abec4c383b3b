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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from .settings import KBConfig, SearchConfig
from .doc_ids import permalink, repo_file, rooted_id_patterns
from .errors import ModelError, NotSyncedError, SearchError
from .index.filters import and_where, build_where
from .index.keywords import cjk_words, keyword_terms
from .index.state import sync_activity
from .freshness import Freshness, indexed_times
from .history import Edition, edition
from .index.contract import Candidate, ChunkView, Store, view_of
from .lru import BoundedLRU
from .models.base import Embedder, Reranker, TokenCounter, query_model_differs
from .passages import NO_PASSAGE_FITS, Budget, Hit, Part, add_context, assemble, fit_budget, parts_of
from .records import KBState
from .requests import ResolvedSearch, unknown_filter_field
from .slices import sliced
from .stopwatch import stopwatch
from .vocabulary import status_uri, sync_remedy


if TYPE_CHECKING:  # the query's vector is a numpy array; numpy loads with the model
    import numpy as np

__all__ = [
    "SearchOutput",
    "common_filter_types",
    "ACROSS_KBS",
    "SearchResult",
]  # what the core's API (mcp_kb.api) offers from this module

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Share of the vector side in hybrid scores, chosen on the dev splits (benchmarks/fusion.py).
VECTOR_SHARE = 0.4
_VECTOR_FLOOR = 0.1  # the last vector candidate keeps 0.1 / 1.1 of its side (benchmarks/fusion.py)
_CACHE_SIZE = 256
ACROSS_KBS = SearchConfig()  # the settings of a search across KBs, where its request leaves one out (no one KB's)
_MAX_DEPTH = 1_000  # candidates per side when over-fetching for distinct passages


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    mode: str  # the mode that produced the hits (keyword when hybrid had to degrade)
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    degraded: bool = False  # keyword search because the vector side failed, or fused order as the reranker failed
    holds_nothing: bool = False  # every KB searched held no document at its last sync (a note says why)

    @property
    def found_nothing(self) -> bool:
        """No passage matched (not: passages matched but the budget could not hold even one's citation)."""
        return not self.hits and not any(note.startswith(NO_PASSAGE_FITS) for note in self.notes)

    def as_dict(self) -> dict[str, object]:
        """The JSON form every face gives (`search --json`, the search tools' structured content)."""
        return SearchOutput(results=list(self.hits), mode=self.mode, notes=self.notes).model_dump(mode="json")


class SearchOutput(BaseModel):
    """A search result's JSON form, whose schema the search tools declare as their output."""

    results: list[Hit]
    mode: str = Field(description="Mode that produced the results")
    notes: list[str] = Field(default_factory=list)


def _version_filter(kb: KBConfig, version: str | None) -> dict[str, object] | None:
    """The documents of the library version asked for (the KB's default when none is), for a KB of versions."""
    if not kb.versions:
        if version is not None:
            raise SearchError(
                f"knowledge base {kb.name!r} holds one version of its documents; `version` is for "
                "knowledge bases with [[kb.versions]]"
            )
        return None
    names = [known.name for known in kb.versions]
    chosen = version or kb.default_version
    if chosen not in names:
        raise SearchError(
            f"knowledge base {kb.name!r} has no version {str(chosen)[:64]!r}; its versions: {', '.join(names)}"
        )
    return {"path": {"prefix": f"{chosen}/"}}


@dataclass(frozen=True)
class SearchModels:
    """The models a search runs: the query's embedder, the tokenizer that counts an answer's token budget, and the
    reranker (none: the fused order stands) with how many of the first candidates it reorders."""

    embedder: Embedder
    tokenizer: TokenCounter
    reranker: Reranker | None = None
    rerank_candidates: int = 30


class Searcher:
    """Runs searches against a store; results are cached per table version."""

    def __init__(self, store: Store, models: SearchModels, owner: str = "", freshness: Freshness | None = None):
        self.store = store
        self.freshness = freshness  # None: hits say nothing of when they were indexed (evaluations)
        self.owner = owner  # this config's kb.toml, when its KBs live in the default index (Config.owner)
        self.embedder = models.embedder
        self.tokenizer = models.tokenizer
        self.reranker = models.reranker
        self.rerank_candidates = models.rerank_candidates
        self._cache: BoundedLRU[str, SearchResult] = BoundedLRU(_CACHE_SIZE)

    def search(self, kb: KBConfig, request: ResolvedSearch) -> SearchResult:
        """Search one KB."""
        return self.search_across([kb], request)

    def search_across(self, kbs: list[KBConfig], request: ResolvedSearch) -> SearchResult:
        """Search KBs as one: each side's candidates pooled over them, fused and assembled together, each hit naming
        its KB (one KB is a pool of one). KBs not synced yet are left out, saying so, unless all are."""
        editions = [edition(self.store, kb.name, request.as_of) for kb in kbs]
        try:
            result = self._search(kbs, request, editions)
        except Exception:
            # A rebuild (maybe in another process) switched generations and dropped the tables this search
            # was reading, before or while it read them: answer from the new generation.
            now = [edition(self.store, kb.name, request.as_of) for kb in kbs]
            if now == editions:
                raise
            result = self._search(kbs, request, now)
        earlier = [
            f"{kb.name}: " * (len(kbs) > 1) + f"answered as of {read.version.describe()}"
            for kb, read in zip(kbs, editions)
            if read.earlier and read.version
        ]
        result = replace(result, notes=[*earlier, *result.notes]) if earlier else result
        return self._dated(kbs, editions, result)

    def _dated(self, kbs: list[KBConfig], editions: list[Edition], result: SearchResult) -> SearchResult:
        """The hits saying when their documents were indexed and, answering from a KB's current version, which
        changed since (after the cache: a file changes without a sync); a note per KB of such hits names the remedy."""
        if self.freshness is None or not result.hits:
            return result
        hits, notes = result.hits, []
        for kb, read in zip(kbs, editions):
            paths = {hit.source for hit in hits if hit.kb == kb.name}
            listing = (
                self.store.reading_listing(kb.name, read.generation, read.at) if paths and read.generation else None
            )
            if listing is None or read.generation is None:
                continue
            indexed_at = indexed_times(listing, paths)
            state = self.store.read_state(kb.name)
            changed = (
                {}
                if read.earlier
                else self.freshness.changed(kb, self.store.fingerprints(kb.name, read.generation, paths), state)
            )
            hits = [
                replace(hit, indexed_at=indexed_at.get(hit.source, ""), changed=changed.get(hit.source, ""))
                if hit.kb == kb.name
                else hit
                for hit in hits
            ]
            if stale := sum(1 for hit in hits if hit.kb == kb.name and hit.stale):
                notes.append(
                    f"{kb.name}: " * (len(kbs) > 1) + f"stale results ({stale}): their documents changed "
                    f"since they were indexed (each says how); {sync_remedy(kb.name)}, then search again"
                )
        return replace(result, hits=hits, notes=[*notes, *result.notes])

    def _search(self, kbs: list[KBConfig], request: ResolvedSearch, editions: list[Edition]) -> SearchResult:
        if len(kbs) > 1:
            common = common_filter_types(kbs)
            unknown = [field for field in request.filters or {} if field not in common]
            if unknown:
                raise SearchError(
                    f"{unknown_filter_field(unknown[0], common)} (a search across knowledge bases "
                    "filters on the fields all of them have)"
                )
        parts, notes = [], []
        for kb, read in zip(kbs, editions):
            try:
                parts.append(self._part(kb, request, read))
            except NotSyncedError:
                if len(kbs) == 1:
                    raise
                notes.append(f"{kb.name}: not synced yet, left out")
            except _Unfinished as unfinished:  # nothing committed yet: an empty answer that says why
                if len(kbs) == 1:
                    return SearchResult([], request.mode, notes=unfinished.notes)
                notes.extend(f"{kb.name}: {note}" for note in unfinished.notes)
        if not parts:
            raise SearchError("none of these knowledge bases has been synced yet")
        # Generation ids never repeat, so a rebuilt index never meets the answers of the old one.
        key = request.cache_key([(part.kb.name, part.view.generation, part.view.version) for part in parts])
        cached = self._cache.get(key)
        if cached is not None:
            return replace(cached, cached=True)
        incomplete = [
            note if len(kbs) == 1 else f"{part.kb.name}: {note}"
            for part in parts
            for note in self._incomplete_index_notes(part.kb.name, part.state)
        ]
        incomplete += [
            f"knowledge base {part.kb.name!r} in the default index was built by another project's kb.toml: "
            "these are that project's documents (give this project an index of its own: storage = "
            '"./.mcp-kb")'
            for part in parts
            if part.state.owned_by_another(self.owner)
        ]
        result = self._run(parts, request, incomplete + notes)
        if not result.notes:  # a degraded answer (model down, index missing) must not outlive the cause
            self._cache.put(key, result)
        return result

    def _part(self, kb: KBConfig, request: ResolvedSearch, read: Edition) -> _Part:
        """One KB's share of a search: its chunks (as the version read left them) and its filter (the KB's own and
        the caller's, both)."""
        view = view_of(self.store, kb.name, read.generation, read.at)
        if view is None:
            if read.generation is not None:
                raise SearchError(
                    f"the index of knowledge base {kb.name!r} has lost its tables; {sync_remedy(kb.name)} to rebuild it"
                )
            if sync_activity(self.store, kb.name) is not None:
                raise _Unfinished(self._incomplete_index_notes(kb.name))
            raise NotSyncedError(kb.name, self.store.uri, self.store.read_state(kb.name).last_error)
        state = self.store.read_state(kb.name)
        _filtered_fields_indexed(kb, state, kb.search.filter, request.filters)
        types, rooted = kb.filter_field_types(), rooted_id_patterns()
        where = and_where(
            build_where(kb.search.filter, types, rooted),
            build_where(request.filters, types, rooted),
            build_where(_version_filter(kb, request.version), types),
        )
        commits = state.commits if not read.earlier else {}
        return _Part(kb, view, where, state, commits or (read.version.commits if read.version else {}))

    @staticmethod
    def _vector_refusal(kb: str, differs: str) -> str:
        return (
            f"vector search is off: {differs}; answered from keyword search ({sync_remedy(kb)} to rebuild the "
            f"index with this model, or see the server's log for why the index's model is not in use)"
        )

    def _incomplete_index_notes(self, kb: str, state: KBState | None = None) -> list[str]:
        """Until a KB's first sync has finished, every answer says the index is incomplete, and how far it is."""
        if (state or self.store.read_state(kb)).complete:
            return []
        progress = sync_activity(self.store, kb)  # written per batch; not yet at the very start
        if progress is not None and not progress.counted and self.store.read_state(kb).complete:
            return []  # it finished between the two reads: its record is gone, its lock not yet
        if progress is not None:
            done = f" ({progress.text()})" if progress.counted else ""
            return [
                f"indexing in progress{done}; these results may be incomplete, search again when it is done "
                f"({status_uri(kb)})"
            ]
        return [f"the first sync of this knowledge base did not finish; results may be incomplete ({sync_remedy(kb)})"]

    def _run(self, parts: list[_Part], request: ResolvedSearch, said: list[str]) -> SearchResult:
        """The answer, its notes ending with what is `said` of the KBs searched."""
        timings: dict[str, float] = {}
        if request.mode == "filter":
            if not all(part.where for part in parts):
                raise SearchError('mode \'filter\' needs filters, e.g. {"path": "docs/leave.md"}')
            rows = _timed(
                timings, "filter", lambda: [(part, row) for part in parts for row in part.view.scan(str(part.where))]
            )  # document order
            mode, notes, rerank_failed = "filter", list[str](), False
            hits = assemble(
                (_hit(part.kb.name, row, 1.0) for part, row in rows),
                request.top_k,
                max_per_document=None,
                query=request.query,
            )
        else:
            mode, hits, notes, rerank_failed = self._passages(parts, request, timings)
            notes.extend(_partial_match_notes(request.query, hits) if mode != "vector" else [])
        if request.context and hits:
            hits = _timed(timings, "context", lambda: _with_context(parts, hits, request.context))
        # the counts a sync stored are this tokenizer's only when the index holds this model's vectors
        counted_alike = [part for part in parts if not query_model_differs(self.embedder, part.state.model)]
        hits, left_out = _timed(
            timings,
            "budget",
            lambda: fit_budget(
                hits,
                Budget(request.max_tokens, self.tokenizer),
                request.query,
                _token_bounds(counted_alike, hits),
                notes + said,
            ),
        )
        hits = _with_commits(parts, hits)
        empty = [why for part in parts if not hits and (why := part.state.last_report.no_documents)]
        return SearchResult(
            hits,
            mode,
            empty + notes + left_out + said,
            timings,
            degraded=mode != request.mode or rerank_failed,
            holds_nothing=len(empty) == len(parts),
        )

    def _passages(
        self, parts: list[_Part], request: ResolvedSearch, timings: dict[str, float]
    ) -> tuple[str, list[Hit], list[str], bool]:
        """`top_k` distinct passages (and whether the reranker failed): when the candidates run out first (e.g.
        all from one document over its cap) and a side had more to give, ask both sides for four times as many."""
        depth = max(
            *(part.kb.search.candidates for part in parts),
            request.top_k,
            self.rerank_candidates if self.reranker else 0,
        )
        rounds = _Rounds(parts, request, timings)  # the query's vector, once however deep the search goes
        while True:
            notes: list[str] = []
            rerank_failed = False
            ranked: Iterable[Hit]  # the reranker's list, or hits read batch by batch until enough pass
            mode, candidates, more = self._candidates(rounds, depth, notes)
            if self.reranker:
                shortlist = candidates[: self.rerank_candidates]
                fetched = _timed(timings, "fetch", lambda: _hits(parts, shortlist))
                if fetched:
                    reranked = _timed(timings, "rerank", lambda: self._rerank(request.query, fetched, notes))
                    fetched, rerank_failed = reranked or fetched, reranked is None
                ranked = fetched
                more = False  # cross-encoder scores cannot be mixed with fused ones further down
            else:
                ranked = _hits_in_batches(parts, candidates, batch=max(2 * request.top_k, 10))
            above = (hit for hit in ranked if hit.score >= request.min_score)
            passages = _timed(
                timings, "assemble", lambda: assemble(above, request.top_k, request.max_per_document, request.query)
            )
            if len(passages) == request.top_k or not more or depth >= _MAX_DEPTH:
                return mode, passages, notes, rerank_failed
            depth = min(depth * 4, _MAX_DEPTH)

    # ---- the two sides ---------------------------------------------------------------------
    def _candidates(self, rounds: _Rounds, depth: int, notes: list[str]) -> tuple[str, list[Candidate], bool]:
        """Ranked chunk ids with scores, and whether a side stopped at `depth` (it may have more).
        Sides run one after the other: on two cores, running them in parallel was slower (hybrid p50
        44.6 ms vs 36 ms at 100k chunks), as LanceDB uses both. Over several KBs each side is pooled: vector scores
        are cosines of one model, so they compare as they are; each KB's BM25 follows its own statistics, a
        rougher match (benchmarks/workbench.py measures how often the right KB wins)."""
        parts, request, timings = rounds.parts, rounds.request, rounds.timings
        mode = request.mode
        vector_weight = self.vector_weight(request.query) if mode == "hybrid" else 1.0
        vector: list[Candidate] = []
        more = False
        if mode == "vector" or (mode == "hybrid" and vector_weight > 0):  # no vote, no vector search
            vector, searched = self._vector_side(rounds, depth, notes)
            more = any(len(found) == depth for found in searched)
            mode = mode if searched else "keyword"
        keyword: list[Candidate] = []
        if mode in ("keyword", "hybrid"):
            sides = [
                _tagged(
                    parts,
                    part,
                    _timed(
                        timings,
                        "keyword",
                        lambda part=part: self._keyword(  # type: ignore[misc]
                            part.view, request.query, part.where, depth, part.kb.search.title_weight
                        ),
                    ),
                )
                for part in parts
            ]
            more = more or any(len(found) == depth for found in sides)
            keyword = _pooled(sides, "keyword_rank")
        if mode == "hybrid":
            return mode, fuse(vector, keyword, vector_weight), more
        return mode, vector or keyword, more

    def _vector_side(
        self, rounds: _Rounds, depth: int, notes: list[str]
    ) -> tuple[list[Candidate], list[list[Candidate]]]:
        """The vector candidates pooled over the KBs, and each KB's list (none for a KB whose index holds another
        model's vectors, or when the model fails: its search answers from keywords). The query's vector is kept for
        the search's next, deeper round."""
        parts, query, timings, embedded = rounds.parts, rounds.request.query, rounds.timings, rounds.embedded
        try:
            if "query" not in embedded:
                embedded["query"] = _timed(timings, "embed", lambda: self.embedder.embed_query(query))
            query_vector = embedded["query"]
        except ModelError as exc:
            notes.append(f"vector search unavailable ({exc}); answered from keyword search")
            log.warning("%s: %s", ", ".join(part.kb.name for part in parts), notes[-1])
            return [], []
        searched = []
        for part in parts:
            # after the embedding: a service's model is known from its answer, with no request of its own
            differs = query_model_differs(self.embedder, part.state.model)
            if differs:
                notes.append(self._vector_refusal(part.kb.name, differs))
                continue
            try:
                found = _timed(timings, "vector", lambda: part.view.nearest(query_vector, part.where, depth))
                searched.append(_tagged(parts, part, found))
            except ModelError as exc:
                notes.append(f"vector search unavailable ({exc}); answered from keyword search")
                log.warning("%s: %s", part.kb.name, notes[-1])
        return _pooled(searched, "vector_rank"), searched

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

    def _rerank(self, query: str, hits: list[Hit], notes: list[str]) -> list[Hit] | None:
        """The hits in the reranker's order; None, with a note, when it fails (the fused order stands)."""
        assert self.reranker is not None  # asked only when one is configured
        try:
            scores = self.reranker.score(query, [h.text for h in hits])
        except ModelError as exc:
            notes.append(f"reranking unavailable ({exc}); passages in the fused order")
            log.warning("%s", notes[-1])
            return None
        ranked = sorted(zip(scores, hits), key=lambda pair: pair[0], reverse=True)
        return [replace(hit, score=float(score)) for score, hit in ranked]


def common_filter_types(kbs: list[KBConfig]) -> dict[str, str]:
    """The filter fields every one of these KBs has, of one type: what a search across them may filter on."""
    types = [kb.filter_field_types() for kb in kbs]
    return {field: kind for field, kind in types[0].items() if all(other.get(field) == kind for other in types[1:])}


def _filtered_fields_indexed(kb: KBConfig, state: KBState, *filters: Mapping[str, object] | None) -> None:
    """A metadata field the config declares since the index was built has no column yet: a filter on it is one
    clear error with the sync that adds it (LanceDB's was a schema error, a traceback on the command line)."""
    metadata = state.fingerprint("metadata")
    indexed = metadata.get("types") if isinstance(metadata, dict) else None
    if indexed is None:  # an index from before fields were recorded: its columns are the config's
        return
    for name in (name for given in filters for name in (given or {})):
        if name in kb.metadata_types() and name not in indexed:
            raise SearchError(
                f"filter field {name!r} is not in the index yet (it was declared after the last "
                f"sync); {sync_remedy(kb.name)} to add it"
            )


def _partial_match_notes(query: str, hits: list[Hit]) -> list[str]:
    """Says so when no passage holds any two-character CJK word of the query: the keyword side then matched
    single characters only, weaker evidence than a word (a query 请假 meeting 年假申请)."""
    words = cjk_words(query)
    if not words or not hits or any(w in f"{h.title}\n{h.heading}\n{h.text}" for h in hits for w in words):
        return []
    shown = "、".join(dict.fromkeys(words[:3]))
    return [
        f"no passage contains a word of the query as written ({shown}); keyword matches are partial (single characters)"
    ]


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
        fused.append(
            Candidate(
                chunk,
                score,
                found.row_id,
                vector_rank=from_vector.vector_rank if from_vector else None,
                keyword_rank=from_keyword.keyword_rank if from_keyword else None,
                kb=found.kb,
            )
        )
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


@dataclass(frozen=True)
class _Part:
    """One KB's share of a search: its chunks, its filter and its state (the model its vectors are of)."""

    kb: KBConfig
    view: ChunkView
    where: str | None
    state: KBState
    commits: dict[str, str]  # the commit each of its repositories was read at, for the version searched
    # Tokens of each chunk read, (path, chunk index) -> the count its sync stored: the token budget is then
    # known to hold without counting again (counting took a fifth of a search's CPU). Filled as rows are read.
    token_counts: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Rounds:
    """What a search's rounds share, each asking both sides for more than the last: the KBs' parts, the request,
    the seconds per stage, and the query's vector once embedded (`embedded["query"]`)."""

    parts: list[_Part]
    request: ResolvedSearch
    timings: dict[str, float]
    embedded: dict[str, np.ndarray] = field(default_factory=dict)


class _Unfinished(Exception):
    """A KB whose first sync has committed nothing yet, with what to say of it."""

    def __init__(self, notes: list[str]):
        super().__init__(*notes)
        self.notes = notes


def _tagged(parts: list[_Part], part: _Part, candidates: list[Candidate]) -> list[Candidate]:
    """A KB's candidates, naming it when the search pools several (row addresses are per table)."""
    return candidates if len(parts) == 1 else [replace(c, kb=part.kb.name) for c in candidates]


def _pooled(sides: list[list[Candidate]], rank: str) -> list[Candidate]:
    """One side's candidates of several KBs in one ranking (by score; a KB alone keeps its own)."""
    if len(sides) == 1:
        return sides[0]
    pooled = sorted((candidate for side in sides for candidate in side), key=lambda c: c.score, reverse=True)
    if rank == "vector_rank":
        return [replace(candidate, vector_rank=number) for number, candidate in enumerate(pooled, start=1)]
    return [replace(candidate, keyword_rank=number) for number, candidate in enumerate(pooled, start=1)]


def _hits(parts: list[_Part], candidates: list[Candidate]) -> list[Hit]:
    """The candidates' hits in their order, each read from its KB's chunks by row address."""
    rows: dict[str, tuple[str, dict[str, Any]]] = {}  # LanceDB's rows
    for part in parts:
        mine = [c for c in candidates if c.kb in ("", part.kb.name)]
        for chunk, row in part.view.rows(mine).items():
            rows[chunk] = (part.kb.name, row)
            part.token_counts[(row["path"], row["chunk_index"])] = row["n_tokens"]
    return [
        _hit(rows[c.id][0], rows[c.id][1], c.score, vector_rank=c.vector_rank, keyword_rank=c.keyword_rank)
        for c in candidates
        if c.id in rows
    ]


def _hits_in_batches(parts: list[_Part], candidates: list[Candidate], batch: int) -> Iterator[Hit]:
    """The candidates' rows, read a batch at a time as assembly asks for more."""
    for some in sliced(candidates, batch):
        yield from _hits(parts, some)


def _token_bounds(parts: list[_Part], hits: list[Hit]) -> list[int | None]:
    """An upper bound of each passage's tokens: the sum of its chunks' stored counts (each counted its heading path
    too, and a merged passage drops the overlaps), plus two for each joint (a byte-level tokenizer may count the
    blank line); None with context around it, or a chunk not read from one of `parts`."""
    counts = {part.kb.name: part.token_counts for part in parts}
    bounds: list[int | None] = []
    for hit in hits:
        known = counts.get(hit.kb, {})
        chunks = [known.get((hit.source, index)) for index in range(hit.chunk_index, hit.last_chunk_index + 1)]
        context = hit.context_before or hit.context_after
        sized = [count for count in chunks if count is not None]
        bounds.append(None if context or len(sized) < len(chunks) else sum(sized) + 2 * (len(chunks) - 1))
    return bounds


def _with_context(parts: list[_Part], hits: list[Hit], n: int) -> list[Hit]:
    """Each passage with up to `n` neighbouring chunks of its document on each side (read from its KB)."""
    by_kb = {}
    for part in parts:
        mine = [hit for hit in hits if hit.kb == part.kb.name]
        if mine:
            spots = [(h.source, i) for h in mine for i in (h.chunk_index, h.last_chunk_index)]
            by_kb[part.kb.name] = dict(zip(map(id, mine), add_context(mine, part.view.neighbours(spots, n), n)))
    return [by_kb[hit.kb][id(hit)] for hit in hits]


def _with_commits(parts: list[_Part], hits: list[Hit]) -> list[Hit]:
    """Each hit from a git repository with the commit it was read at, and a permalink where the KB gives a
    template."""
    by_kb = {part.kb.name: part for part in parts if part.commits}
    cited = []
    for hit in hits:
        part = by_kb.get(hit.kb)
        found = repo_file(part.kb, hit.source) if part else None
        commit = part.commits.get(found.key, "") if part and found else ""
        cited.append(
            replace(hit, commit=commit, link=permalink(found.repo, commit, found.path, hit.line_start, hit.line_end))
            if found and commit
            else hit
        )
    return cited


def _hit(
    kb: str,
    row: dict[str, Any],  # LanceDB's row
    score: float,
    vector_rank: int | None = None,
    keyword_rank: int | None = None,
) -> Hit:
    """A chunk's hit, with its parts (cited by its first until a passage is made of it: assemble)."""
    parts = parts_of(row.get("parts"), Part(row["heading"] or "", row["line_start"], row["line_end"], row["page"]))
    first = parts[0]
    return Hit(
        text=row["text"],
        source=row["path"],
        title=row["title"] or "",
        heading=first.heading,
        page=row["page"],
        chunk_index=row["chunk_index"],
        score=round(float(score), 6),
        line_start=first.line_start,
        line_end=first.line_end,
        vector_rank=vector_rank,
        keyword_rank=keyword_rank,
        kb=kb,
        parts=parts,
    )


def _timed(timings: dict[str, float], stage: str, work: Callable[[], _T]) -> _T:
    """`work()`, its milliseconds added to `timings` under `stage` (a stage may run once per KB, or per round)."""
    with stopwatch(lambda seconds: timings.__setitem__(stage, round(timings.get(stage, 0.0) + seconds * 1000, 2))):
        return work()
