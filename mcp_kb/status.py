"""What status says of a KB, read from its index and the records beside it: a glance (no file list read, no row
counted: the admin page polls it), the full status (counts from the index itself, a KB whose tables cannot be
opened said so), its figures (`mcp-kb stats`) and its recent syncs."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .errors import StoreError
from .index.contract import Store
from .index.state import read_health, read_metrics, read_summary, sync_activity
from .models.base import Embedder, query_model_differs
from .records import (
    Glance,
    KBStats,
    KBStatus,
    KBSummary,
    LastSyncFigures,
    Pending,
    Problem,
    SyncHistory,
    SyncProgress,
)
from .settings import KBConfig
from .vocabulary import sync_named

log = logging.getLogger(__name__)

# What status says of a KB whose tables cannot be opened, to every caller who sees the KB: no command line (a
# remedy names the config file and the storage), and the error itself, naming the storage, goes to the log.
_UNREADABLE = (
    "cannot be read now (damaged files, or the storage failing: the log says which); if its files are "
    f"damaged, a full sync ({sync_named('full')}) rebuilds it"
)


def glance_of(store: Store, storage: str, kb: KBConfig, embedder: Embedder | None, pending: Pending | None) -> Glance:
    """A KB's status without reading its file list or counting rows: contents as of the last good sync (its
    summary; during a first sync, what it has written so far), the last sync's outcome and failures, a running
    sync's progress, health; `embedder`: the model this process loaded, if any (is it the one the index holds?);
    `pending`: what a sync would do as this process last counted it."""
    name = kb.name
    state = store.read_state(name)
    report = state.last_report
    summary = read_summary(storage, name, lambda: store)
    progress = sync_activity(store, name)
    if summary is None:  # before the first sync ends: what it has written so far (nothing when none runs)
        summary = KBSummary(documents=progress.written, chunks=progress.chunks) if progress else KBSummary()
    return Glance(
        name=name,
        description=kb.description,
        tool=kb.search_tool_name,
        files=summary.documents,
        chunks=summary.chunks,
        sync_running=progress is not None,
        progress=progress or SyncProgress(),
        last_sync=state.finished_at,
        last_outcome=state.outcome,
        last_error=state.last_error,
        seconds=report.seconds.get("total"),
        failed_files=report.files_failed,
        model=state.indexed_model,
        query_model_differs=query_model_differs(embedder, state.model) if embedder else "",
        index_state=report.index_state,
        health=read_health(store, name),
        commits=state.commits,
        pending=pending,
    )


def status_of(store: Store, glanced: Glance, pending: Callable[[], Pending | None]) -> KBStatus:
    """The glance, with the counts read from the index itself, its version, the failed files and what a sync would
    do now (`pending` counts it); a KB whose tables cannot be opened keeps its glance, saying so (the status of the
    others and the list of KBs stand)."""
    name = glanced.name
    try:
        files = store.read_files(name)
        return KBStatus(
            **{
                **glanced.__dict__,
                "files": sum(1 for r in files.values() if r.status == "indexed"),
                "chunks": store.count_chunks(name),
                "pending": pending(),
            },
            index_version=store.version(name),
            generation=store.active_generation(name),
            failed=tuple(Problem(p, r.reason) for p, r in files.items() if r.status == "failed"),
        )
    except StoreError as exc:
        log.warning("%s: %s", name, exc)
        return KBStatus(**{**glanced.__dict__, "index_state": _UNREADABLE})


def stats_of(store: Store, storage: str, name: str) -> KBStats:
    """A KB's saved search metrics (of the last process that answered), the last sync's figures and the latest
    health check, read without opening a model."""
    state = store.read_state(name)
    report = state.last_report
    last = LastSyncFigures(state.finished_at, report.chunks_embedded, report.tokens_embedded, report.seconds)
    return KBStats(name, read_metrics(storage, name), read_health(store, name), last)


def sync_history_of(store: Store, name: str) -> SyncHistory:
    """The recent syncs of a KB in brief (oldest first), and the last one's skipped files and source figures (a web
    crawl's requests, 304s, robots skips)."""
    state = store.read_state(name)
    return SyncHistory(state.recent_syncs, state.last_report.skipped, state.last_report.crawl)
