"""The library object the CLI and the MCP server share: config, models and store, loaded lazily."""

from __future__ import annotations

import logging
import threading
import time
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING

from . import history, kept_versions
from .audit import AuditTrail
from .settings import DEFAULT_MODE, Config, KBConfig, megabytes
from .errors import KBError, NotSyncedError
from .freshness import Freshness
from .heap import return_free_heap
from .dry_run import check_kb, file_chunks
from .evaluation import Finder, ModeScores, SelfCheck, check_health, evaluate_modes, unmatched_documents
from .index import open_store
from .index.contract import ChunkView, Store, view_of
from .index.state import (
    is_sync_running,
    query_log_path,
    read_metrics,
    read_summary,
    source_cache_dir,
    write_health,
    write_metrics,
)
from .ingest.chunking import Chunk
from .ingest.sources import Source, sources_of
from .metrics import Metrics, QueryLog
from .models import create_embedder, create_reranker, load_token_counter, model_source
from .models.base import Embedder, TokenCounter
from .cursors import Cursors
from .read_outputs import BrowseOutput, ReadOutput
from .records import (
    Glance,
    KBCheck,
    KBState,
    KBStats,
    KBStatus,
    KBSummary,
    Pending,
    Progress,
    SearchFigures,
    SyncHistory,
)
from .requests import (
    BrowseRequest,
    EvaluateRequest,
    ReadRequest,
    RollbackRequest,
    SearchRequest,
    SelfCheckRequest,
    SyncRequest,
    TagRequest,
)
from .search import ACROSS_KBS, SearchModels, Searcher, SearchResult
from .status import glance_of, stats_of, status_of, sync_history_of
from .stopwatch import Stopwatch
from .records import KBVersion, SyncReport
from .sync import SyncTools, count_pending, refuse_another_projects, sync_all


if TYPE_CHECKING:
    from .reader import Reader

__all__ = ["App"]  # what the core's API (mcp_kb.api) offers from this module

log = logging.getLogger(__name__)


class App:
    """Everything a command or a tool needs; heavy parts load on first use."""

    def __init__(self, config: Config, embedder: Embedder | None = None, serving: bool = False):
        self.config = config
        self._embedder = embedder
        self._serving = serving  # a server or the admin page: its model is set up for queries
        self._lock = threading.Lock()
        self.metrics = Metrics()
        self.saves_metrics = False  # servers save their figures now and then; a one-off command does not
        # A sync command or watcher lets the model go once a KB is embedded (its index builds are the peak of
        # a sync's memory); a server keeps it for the next search.
        self.releases_model = False
        self._query_logs: dict[str, QueryLog] = {}
        self.audit = AuditTrail(config.server)  # one per process: /mcp and the page write the same file
        self._problems_said: set[str] = set()  # what this process's log said went wrong (said once, not per attempt)
        self._pending: dict[str, tuple[float, int | None, Pending | None]] = {}  # by KB: when, at which version
        self._counting: set[str] = set()  # KBs whose count runs now

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = create_embedder(self.config.embedding)
                if self._serving:
                    self._embedder.serve_queries()
            return self._embedder

    def warm_up(self) -> None:
        """What a server's first search would load (the store, the model, its tokenizer), loaded now; then the heap
        the start-up freed goes back to the system (a stdio server 305 -> 290 MB after 200 searches)."""
        self.searcher.embedder.embed_query("warm up")
        self.searcher.tokenizer.count(["warm up"])  # it loads at its first use, which would be the first search
        return_free_heap()

    def log_problem(self, doing: str, problem: Exception) -> None:
        """Log what went wrong while `doing` something: a warning the first time this process meets the problem,
        then a line at info (a model that does not load fails the warm-up and the start-up sync alike, in the same
        words, in either order; a watcher's syncs fail again and again for one cause)."""
        with self._lock:
            first = str(problem) not in self._problems_said
            self._problems_said.add(str(problem))
        log.log(logging.WARNING if first else logging.INFO, "%s: %s", doing, problem)

    @cached_property
    def tokenizer(self) -> TokenCounter:
        return load_token_counter(self.config.embedding)

    @cached_property
    def store(self) -> Store:
        return open_store(self.config.storage)

    @cached_property
    def searcher(self) -> Searcher:
        rerank = self.config.rerank
        models = SearchModels(self.embedder, self.tokenizer, create_reranker(rerank), rerank.candidates)
        return Searcher(self.store, models, self.config.owner, self.freshness)

    @cached_property
    def freshness(self) -> Freshness:
        """Which documents of an answer changed since they were indexed (one per process: it remembers what each
        repository's ref was last seen at)."""
        return Freshness(
            lambda kb: source_cache_dir(self.config.storage.uri, kb),
            asks_remotes=self._serving,
            owner=self.config.owner,
        )

    def search(self, kb: str, request: SearchRequest, record: bool = True) -> SearchResult:
        """Search one KB; what the request leaves out is the KB's setting. `record=False` (evaluations asking
        made-up or labelled queries) leaves the metrics and the query log to what users asked."""
        kb_config = self.config.get_kb(kb)
        resolved = request.resolved(kb_config.search)
        watch = Stopwatch()
        result = self.searcher.search(kb_config, resolved)
        if not record:
            return result
        elapsed_ms = watch.milliseconds
        embedded = "embed" in result.timings_ms and not result.cached
        self.metrics.record(
            kb_config.name, result, elapsed_ms, self.tokenizer.count([request.query])[0] if embedded else 0
        )
        if self.saves_metrics and self.metrics.due(kb_config.name):
            write_metrics(self.config.storage.uri, kb_config.name, self.metrics.snapshot(kb_config.name))
        if kb_config.search.query_log:
            self._query_log(kb_config).write(request.query, resolved.mode, request.filters, result, elapsed_ms)
        return result

    def _query_log(self, kb: KBConfig) -> QueryLog:
        with self._lock:
            if kb.name not in self._query_logs:
                self._query_logs[kb.name] = QueryLog(
                    query_log_path(self.config.storage.uri, kb.name), megabytes(kb.search.query_log_max_mb)
                )
            return self._query_logs[kb.name]

    def live_stats(self, kb: str) -> KBStats:
        """A KB's stats with this process's search figures (saved first, so `mcp-kb stats` shows them too)."""
        name = self.config.get_kb(kb).name
        write_metrics(self.config.storage.uri, name, self.metrics.snapshot(name))
        return stats_of(self.store, self.config.storage.uri, name)

    def search_figures(self, kb: str) -> SearchFigures | None:
        """A KB's search figures: this process's when it has answered searches, else the saved ones of the
        last process that did (None: none did)."""
        name = self.config.get_kb(kb).name
        live = self.metrics.snapshot(name)
        return live if live.searches else read_metrics(self.config.storage.uri, name)

    def sync_history(self, kb: str) -> SyncHistory:
        """The recent syncs of a KB in brief (oldest first), and the last one's skipped files and source
        figures (a web crawl's requests, 304s, robots skips)."""
        return sync_history_of(self.store, self.config.get_kb(kb).name)

    def _state(self, kb: str) -> KBState:
        return self.store.read_state(self.config.get_kb(kb).name)

    def chunk_text(self, kb: str, doc_id: str, chunk_index: int) -> str | None:
        """The indexed text of one chunk of a document, None when the index has no such chunk."""
        view = self._active_view(self.config.get_kb(kb).name)
        return view.neighbours([(doc_id, chunk_index)], 0).get((doc_id, chunk_index)) if view else None

    def _active_view(self, name: str) -> ChunkView | None:
        """The chunks of the KB's active generation, None before any sync committed one."""
        return view_of(self.store, name, self.store.active_generation(name))

    def stats(self, kb: str | None = None) -> list[KBStats]:
        """Per KB: the saved search metrics of the last process that answered, the last sync's
        figures and the latest health check, read without opening a model."""
        return [stats_of(self.store, self.config.storage.uri, k.name) for k in self.config.select(kb)]

    def sync(self, request: SyncRequest | None = None, progress: Progress | None = None) -> list[SyncReport]:
        """Sync the KB the request names (every KB without one); `progress` hears how far it is."""
        tools = SyncTools(self.config, self.store, self.embedder, lambda: self.tokenizer, self.releases_model)
        reports = sync_all(tools, request or SyncRequest(), progress)
        self._self_check_rebuilt(reports)
        return reports

    def _self_check_rebuilt(self, reports: list[SyncReport]) -> None:
        """A model or chunking change that hurts retrieval shows at once: each rebuilt KB's hit rate, when its
        `[kb.sync] self_check_sample` asks for one."""
        for report in reports:
            sample = self.config.get_kb(report.kb).sync.self_check_sample
            if report.rebuilt and sample:
                try:
                    self.self_check(SelfCheckRequest(kb=report.kb, modes=(DEFAULT_MODE,), sample=sample))
                except KBError as exc:  # e.g. a KB with nothing to ask about: the sync itself went well
                    log.warning("%s: no hit rate after the rebuild: %s", report.kb, exc)

    def versions(self, kb: str) -> list[KBVersion]:
        """A KB's kept versions, oldest first: what each sync (or rollback) changed, when, by whom, its tags."""
        return kept_versions.versions(self.store, self.config.get_kb(kb).name)

    def tag(self, request: TagRequest) -> KBVersion:
        """Tag a version of a KB (the current one by default), or remove a tag; the version tagged (or untagged)."""
        return history.tag(self.store, self._changeable(request.kb), request.name, request.version, request.remove)

    def rollback(self, request: RollbackRequest) -> KBVersion:
        """Make an earlier version of a KB current again (a version number, a tag or a time), as a new version."""
        return history.rollback(self.store, self._changeable(request.kb), request.to, request.by)

    def _changeable(self, kb: str) -> KBConfig:
        """A KB this project may change: not one another project's kb.toml built in the shared default index."""
        config = self.config.get_kb(kb)
        refuse_another_projects(self.store, config.name, self.config.owner)
        return config

    @cached_property
    def reader(self) -> Reader:
        from .reader import Reader  # with Arrow's compute functions, which a server's handshake need not wait for

        return Reader(self.store, lambda: self.tokenizer, Cursors(self.config.server.cursor_secret), self.freshness)

    def read(self, kb: str, request: ReadRequest) -> ReadOutput:
        """A part of a document of a KB, from its index, within the request's token budget."""
        return self.reader.read(self.config.get_kb(kb), request)

    def read_through(self, kb: str, request: ReadRequest) -> ReadOutput:
        """The whole part a read asks for, in one answer (no token budget: `mcp-kb read`)."""
        return self.reader.read_through(self.config.get_kb(kb), request)

    def browse(self, kb: str, request: BrowseRequest) -> BrowseOutput:
        """A page of a KB's documents, or of one document's outline, from its index."""
        return self.reader.browse(self.config.get_kb(kb), request)

    def browse_through(self, kb: str, request: BrowseRequest, limit: int | None = None) -> BrowseOutput:
        """Up to `limit` entries (None: all) of a listing or an outline in one answer (`mcp-kb ls`)."""
        return self.reader.browse_through(self.config.get_kb(kb), request, limit)

    def documents_under(self, kb: str, prefix: str, limit: int) -> tuple[list[str], int]:
        """Up to `limit` paths of a KB's documents under `prefix` that callers may see, and how many there are."""
        return self.reader.documents_under(self.config.get_kb(kb), prefix, limit)

    def document_text(self, kb: str, doc_id: str) -> str:
        """The whole text of one document of a KB as its index holds it (bounded: reader.RESOURCE_MAX_CHARS)."""
        return self.reader.whole(self.config.get_kb(kb), doc_id)

    def search_across(self, kbs: list[str], request: SearchRequest) -> SearchResult:
        """Search several KBs as one; what the request leaves out is the default. Not counted in any KB's search
        figures or query log (a search of several is none of theirs)."""
        configs = [self.config.get_kb(kb) for kb in dict.fromkeys(kbs)]
        return self.searcher.search_across(configs, request.resolved(ACROSS_KBS))

    def sources(self, kb: KBConfig, cache_folder: Path | None = None) -> list[Source]:
        """The KB's sources, keeping what they download in this machine's cache (or `cache_folder`)."""
        return sources_of(kb, cache_folder or source_cache_dir(self.config.storage.uri, kb.name))

    def chunks(self, file: Path) -> tuple[list[Chunk], tuple[str, ...]]:
        """The chunks a file yields with the first KB's chunking settings (or the defaults), and the
        parser's notes; the same parsing and chunking as a sync, and only the model's tokenizer."""
        return file_chunks(self.config, file, lambda: self.tokenizer)

    def self_check(self, request: SelfCheckRequest) -> list[SelfCheck]:
        """Label-free hit rate per mode: queries made from a sample of random chunks (evaluation.py says how)."""
        name = self.config.get_kb(request.kb).name
        view = self._active_view(name)
        if view is None:
            raise NotSyncedError(name, self.config.storage.uri)
        rows = view.sample(request.sample, request.seed)
        checks, health = check_health(rows, self._finder(name), list(request.modes), request.k)
        write_health(self.store, name, health)
        return checks

    def evaluate(self, request: EvaluateRequest) -> tuple[list[ModeScores], str]:
        """Labelled queries scored per mode (recall@k, MRR@10, nDCG@10, latency), and a warning when the
        judgements name documents the KB does not hold ("" when all are there)."""
        warning = unmatched_documents(request.judgements, self.document_ids(request.kb))
        found = evaluate_modes(
            self._finder(request.kb), request.queries, request.judgements, list(request.modes), request.k
        )
        return found, warning

    def _finder(self, kb: str) -> Finder:
        """The hits' sources of a search of the KB, recorded nowhere (an evaluation's queries are not users')."""
        return lambda request: [hit.source for hit in self.search(kb, request, record=False).hits]

    def check(self, kb: str | None = None) -> list[KBCheck]:
        """Per KB, what a sync would index: files by type, chunks per file, skipped files with reasons."""
        return [check_kb(self.config.sync, k, lambda: self.tokenizer) for k in self.config.select(kb)]

    def status(self, kb: str | None = None) -> list[KBStatus]:
        """Per KB: files, chunks, last sync, model, index state, failed files."""
        return [
            status_of(self.store, self.glance(k.name), partial(self.pending, k.name)) for k in self.config.select(kb)
        ]

    def model_source(self) -> str:
        """Where the embedding model is read from (a folder, a cache, not yet here, or a service)."""
        return model_source(self.config.embedding)

    def index_busy(self) -> bool:
        """Whether a sync (of any KB of this index, by any process) holds the index's writer lock now."""
        return is_sync_running(self.store)

    def document_ids(self, kb: str) -> list[str]:
        """The ids (paths) of every document the KB's index holds."""
        return list(self.store.read_files(self.config.get_kb(kb).name))

    def summary(self, kb: str) -> KBSummary:
        """What a KB holds (documents, their kinds, chunks) as of its last sync (all zero before one): for an
        index in a folder read without opening LanceDB (a starting server describes its tools with it), on
        object storage from the store (another machine may have synced)."""
        return read_summary(self.config.storage.uri, kb, lambda: self.store) or KBSummary()

    def glance(self, kb: str) -> Glance:
        """A KB's status without reading its file list or counting rows (the admin page polls it for every
        KB): contents as of the last good sync (its summary; during a first sync, what it has written so far),
        the last sync's outcome and failures, a running sync's progress, health, and what a sync would do as this
        process last counted it (App.pending_known: a glance counts nothing)."""
        kb_config = self.config.get_kb(kb)
        pending = self.pending_known(kb_config.name)
        return glance_of(self.store, self.config.storage.uri, kb_config, self._embedder, pending)

    def pending(self, kb: str, counted_within: float = 0.0) -> Pending | None:
        """What a sync of a KB would do now, by listing and stat (None: it cannot be counted so); a count made in the
        last `counted_within` seconds at the same index version is given again (the admin page polls)."""
        name = self.config.get_kb(kb).name
        version = self._state(name).version
        with self._lock:
            counted = self._pending.get(name)
            recent = counted and counted[1] == version and time.monotonic() - counted[0] <= counted_within
            if counted and (recent or (counted_within and name in self._counting)):
                return counted[2]  # a poller does not start a second count beside a running one (a slow mount)
            self._counting.add(name)
        try:
            pending = count_pending(self.store, self.config.get_kb(name), self.config.owner)
        finally:
            with self._lock:
                self._counting.discard(name)
        with self._lock:
            self._pending[name] = (time.monotonic(), version, pending)
        return pending

    def pending_known(self, kb: str) -> Pending | None:
        """This process's last count of what a sync of a KB would do, while the index is at the version it was
        counted at (None: none made, or a sync since, by any process): a tool's description says it without
        counting, and a server that has not counted yet reads nothing for it."""
        name = self.config.get_kb(kb).name
        with self._lock:
            counted = self._pending.get(name)
        return counted[2] if counted and counted[1] == self._state(name).version else None
