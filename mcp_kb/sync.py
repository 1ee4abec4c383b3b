"""Content-hash incremental sync: plan what changed, then apply it file batch by file batch.

Only new or changed files are parsed; only chunks whose content has no stored vector are
embedded; each batch of files is swapped in one commit; the manifest is written after the
chunks, so a crash at any point is repaired by the next sync. With `[sync] engine = "ray"` a Ray
cluster parses and embeds instead, a wave of batches per commit (ray_engine.py); the rest is the same.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from .settings import Config, KBConfig, SyncEngineConfig
from .digest import file_sha256
from .errors import KBError, MassDeleteError, ModelError, OwnedElsewhereError, StoreError, SyncCancelled
from .kept_versions import (
    Synced,
    check_tag,
    forget_generation,
    prune as prune_versions,
    record as record_version,
    settled_state,
)
from .index.contract import FileRecord, Store, new_generation
from .index.keywords import ANALYZER_VERSION
from .schema import chunk_schema
from .index.state import check_writable, clear_progress, source_cache_dir, sync_lock, write_progress, write_summary
from .ingest.chunking import effective_max_tokens
from .ingest.ocr import available as ocr_available
from .ingest.sources import SkippedFile, SourceFile, count_kinds, list_all, scan_all, sources_of, why_no_documents
from .ingest.workers import ParseWorkers
from .models.base import Embedder, TokenCounter
from .batches import (
    BATCH_FILES,
    COMMIT_SECONDS,
    EmbeddingProgress,
    ParsedFile,
    SyncContext,
    Timer,
    count_batch,
    embedded_pieces,
    not_indexed,
    parse_job,
    parsed_files,
    parsing_peak_mb,
    refuse,
    write_readings,
    written_records,
)
from .records import KBState, KBSummary, Pending, Problem, Progress, SyncProgress, SyncReport, commits_of, recorded_now
from .requests import SyncRequest
from .slices import sliced
from .stopwatch import Stopwatch
from .vocabulary import rebuild_option, sync_remedy, work_kept

log = logging.getLogger(__name__)

# A sync that would delete at least this many documents, and more than [kb.sync] max_delete_share of
# a KB, is refused without --allow-mass-delete (as is any sync whose paths yield no file at all).
MASS_DELETE_MIN_FILES = 20
_TITLES_IN_SUMMARY = 6  # document titles a tool description names, so an LLM can tell what the KB holds


@dataclass(frozen=True)
class SyncPlan:
    """What a sync must do, by path."""

    added: list[str]
    changed: list[str]
    deleted: list[str]
    unchanged: list[str]


def plan_sync(disk_hash_by_path: dict[str, str], indexed_hash_by_path: dict[str, str]) -> SyncPlan:
    """Compare content hashes on disk with those in the index."""
    added = sorted(p for p in disk_hash_by_path if p not in indexed_hash_by_path)
    changed = sorted(
        p for p, h in disk_hash_by_path.items() if p in indexed_hash_by_path and indexed_hash_by_path[p] != h
    )
    unchanged = sorted(p for p, h in disk_hash_by_path.items() if indexed_hash_by_path.get(p) == h)
    deleted = sorted(p for p in indexed_hash_by_path if p not in disk_hash_by_path)
    return SyncPlan(added, changed, deleted, unchanged)


def count_pending(store: Store, kb: KBConfig, owner: str = "") -> Pending | None:
    """What a sync of the KB would do now, by listing and stat (a new or changed file is opened to see that it is
    text, as a sync's scan does; nothing is hashed or parsed); None when its sources cannot be listed so (a web site,
    a repository), its folder is not here, no sync indexed it, or it is another project's (`owner`: Config.owner)."""
    state = store.read_state(kb.name)
    if state.generation is None or state.owned_by_another(owner):
        return None
    try:
        manifest = store.read_files(kb.name, state.generation)
        indexed = {path: (record.size, record.mtime_ns) for path, record in manifest.items()}
        listed = list_all(sources_of(kb, source_cache_dir(store.uri, kb.name)), indexed)
    except KBError:  # a folder that is not here (a reader of a shared index), damaged tables: nothing to count
        return None
    if listed is None:
        return None
    present = {item.doc_id: (item.size, item.mtime_ns) for item in listed.files}
    return Pending(
        added=sum(1 for path in present if path not in indexed),
        changed=sum(1 for path, seen in present.items() if path in indexed and indexed[path] != seen),
        deleted=len(_gone(indexed, present, [item for item in listed.skipped if item.unreadable])),
        counted_at=recorded_now(),
    )


def _gone(indexed: Collection[str], present: Collection[str], unreadable: Sequence[SkippedFile]) -> list[str]:
    """The documents a sync deletes: indexed, no longer listed, and not below what could not be read (a sync keeps
    what the index holds of those)."""
    return [path for path in indexed if path not in present and not any(item.covers(path) for item in unreadable)]


@dataclass(frozen=True)
class SyncTools:
    """What a process syncs its KBs with: its configuration and storage, its model (the tokenizer loaded by each
    KB's sync, so a missing one is that KB's recorded failure), and whether the model's memory may go before each
    KB's index phase (`release_model`)."""

    config: Config
    store: Store
    embedder: Embedder
    load_counter: Callable[[], TokenCounter]
    release_model: bool = False


def sync_all(tools: SyncTools, request: SyncRequest, progress: Progress | None = None) -> list[SyncReport]:
    """Sync the KB the request names, or all of them, holding the storage's writer lock (waiting for it when
    the request says so)."""
    kbs = tools.config.select(request.kb)
    check_writable(tools.store)
    try:
        with sync_lock(tools.store, [kb.name for kb in kbs], wait=request.wait):
            return [sync_kb(tools, kb, request, progress) for kb in kbs]
    finally:  # a server keeps its query model, not what the sync's batches took, however the sync ended
        tools.embedder.release_batches()


def sync_kb(tools: SyncTools, kb: KBConfig, request: SyncRequest, progress: Progress | None = None) -> SyncReport:
    """Bring one KB's tables in step with its files; the caller holds the sync lock.

    Nothing destructive happens before its preconditions hold: the sources were read (a missing
    root raises, a mass deletion is refused), and for a rebuild the model has embedded a test
    text. A rebuild fills a new generation and switches to it only when it is complete.
    """
    config, store, embedder = tools.config, tools.store, tools.embedder
    _claim(store, kb, config)  # before the try: a refusal is not recorded as the other project's failure
    report = SyncReport(kb.name)
    started = recorded_now()
    wall = Stopwatch()
    timer = Timer(report)
    progress = _recording_progress(store, kb.name, progress, report)
    committed = False  # the sync's final state write is done: what it wrote is a version already
    try:
        with timer("prepare"):
            counter = tools.load_counter()
            fingerprints = _fingerprints(kb, embedder, counter, store.layout)
            state = settled_state(store, kb)  # a rollback a crash interrupted is finished first
            check_tag(store, kb.name, request.tag)
            active = state.generation
            active_files, unusable = _active_manifest(
                store, kb.name, active, rebuild_asked=request.full or request.reembed
            )
        with timer("scan"):
            # A commit vouches for the active generation's files as the manifest lists them: not for a lost one.
            vouched = state.revisions if active_files and not unusable else {}
            scan = scan_all(
                sources_of(kb, source_cache_dir(store.uri, kb.name)),
                known={p: (r.size, r.mtime_ns) for p, r in active_files.items()},
                progress=progress,
                revisions=vouched,
            )
            report.crawl = scan.figures
            report.commits = commits_of(scan.revisions)
            if state.revisions and (scan.revisions != vouched or request.full or request.reembed):
                # From here the index may hold what no recorded commit describes (a crash, a failure): withdrawn.
                store.write_state(kb.name, store.read_state(kb.name).without_revisions())
            report.skipped = [Problem(s.doc_id, s.reason) for s in scan.skipped]
            unreadable = [s for s in scan.skipped if s.unreadable]
            _refuse_mass_delete(kb, active_files, {f.doc_id for f in scan.files}, unreadable, request.allow_mass_delete)
        with timer("prepare"):
            target, reuse_from = _target_generation(store, kb, embedder, state, fingerprints, request, unusable, report)
            indexed = active_files if target == active else store.read_files(kb.name, target)
        with timer("hash"):
            hash_by_path, hash_failures = _hash_files(scan.files, {**active_files, **indexed})
        _keep_unreadable(indexed, hash_by_path, unreadable, hash_failures, report)
        plan = plan_sync(hash_by_path, {p: r.file_hash for p, r in indexed.items()})
        report.files_added, report.files_changed = len(plan.added), len(plan.changed)
        report.files_deleted, report.files_unchanged = len(plan.deleted), len(plan.unchanged)
        files_by_path = {f.doc_id: f for f in scan.files}
        todo = [files_by_path[p] for p in plan.added + plan.changed]
        progress(0, len(todo), f"{kb.name}: {len(todo)} files to index")
        context = SyncContext(store, kb, target, reuse_from, embedder, report, timer, counter, progress)
        synced = Synced(report, target, fingerprints, started, request.by, request.tag)
        if todo and config.sync.engine == "ray":
            from .ray_engine import index_on_ray  # imports Ray: only such syncs pay for it

            index_on_ray(config, context, todo, hash_by_path)
        elif todo:
            _apply_changes(context, todo, hash_by_path, config.sync)
        if tools.release_model:
            embedder.release()
        with timer("delete"):
            report.chunks_deleted += _remove_deleted(store, kb.name, target, plan, set(hash_by_path))
            store.write_files(kb.name, target, _touched(indexed, files_by_path, hash_by_path))
        with timer("index"):
            changed = bool(plan.added or plan.changed or report.chunks_deleted or report.rebuilt)
            report.index_state = store.refresh_indexes(kb.name, target, changed)
        report.chunks_total = store.count_chunks(kb.name, target)
        files = store.read_files(kb.name, target)
        report.no_documents = "" if files else why_no_documents(kb, scan)
        unchanged = set(plan.unchanged)
        report.failures += [Problem(p, r.reason) for p, r in files.items() if r.status == "failed" and p in unchanged]
        _count_each_file_once(report, plan)
        report.seconds["total"] = round(wall.seconds, 3)
        titles = store.document_titles(kb.name, target, _TITLES_IN_SUMMARY)
        write_summary(store, kb.name, _summary(files, report, titles))
        version = record_version(store, kb.name, synced)
        # One commit makes this generation the one searches read (the switch, after a rebuild) and the version current.
        store.write_state(
            kb.name,
            state.ended(started, "ok", report, confirmed=not unreadable).synced(
                fingerprints, target, version, scan.revisions, config.owner
            ),
        )
        committed = True
        prune_versions(store, kb)  # first: a generation only a forgotten version kept goes now
        store.drop_generations(kb.name, keep={target})
        return report
    except Exception as exc:
        error = str(exc) if isinstance(exc, KBError) else f"{type(exc).__name__}: {exc}"
        if report.files_written and not committed:
            _version_what_was_kept(store, kb.name, synced, active_files)
        # Every caller who sees the KB reads the record: the index's and the cluster's places stay out of it.
        outcome = "interrupted" if isinstance(exc, SyncCancelled) else "failed"
        _record_failure(store, started, config.unlocated(error), report, outcome)
        raise
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM where the command turns it into one
        wanted = report.files_added + report.files_changed
        kept = work_kept(rebuild_option(request.full, request.reembed))
        if report.files_written and not committed:
            _version_what_was_kept(store, kb.name, synced, active_files)
        error = f"interrupted after writing {report.files_written} of {wanted} new and changed files; {kept}"
        _record_failure(store, started, error, report, outcome="interrupted")
        raise
    finally:
        clear_progress(store, kb.name)


def _claim(store: Store, kb: KBConfig, config: Config) -> None:
    """Two projects whose kb.toml name no storage share the per-user default index: a KB of one name in both would
    be one KB, each sync flipping it to its own files. The second project's sync is refused, naming both."""
    state = refuse_another_projects(store, kb.name, config.owner)
    if config.owner and not state.owner:  # claimed before anything is written: a first sync that stops names it too
        store.write_state(kb.name, state.owned_by(config.owner))


def refuse_another_projects(store: Store, kb: str, owner: str) -> KBState:
    """The KB's state, when the project of kb.toml `owner` may change it (a sync, a tag, a rollback): not when
    another project's kb.toml built it in the shared default index (OwnedElsewhereError)."""
    state = store.read_state(kb)
    other = state.owned_by_another(owner)
    if other:
        raise OwnedElsewhereError(kb, other, owner)
    return state


def _version_what_was_kept(store: Store, kb: str, synced: Synced, before: dict[str, FileRecord]) -> None:
    """A sync that stopped after writing files searches read (into the active generation) records them as a version
    of its own: `versions` then says what the index holds, and the next version counts from there."""
    target = synced.generation
    try:
        if target != store.read_state(kb).generation:
            return  # a rebuild's generation beside the active one: searches read none of it yet
        now = store.read_files(kb, target)
        kept = {path: record for path, record in now.items() if record.status != "failed"}
        written = SyncReport(
            kb,
            files_added=sum(path not in before for path in kept),
            files_changed=sum(
                path in before and record.file_hash != before[path].file_hash for path, record in kept.items()
            ),
        )
        committed = record_version(store, kb, replace(synced, report=written, tag=None, kind="unfinished"))
        store.write_state(kb, store.read_state(kb).at_version(committed))
    except Exception:  # the store itself may be what failed; the sync's own error is what matters
        log.debug("could not record the files an unfinished sync of %s kept", kb, exc_info=True)


def _count_each_file_once(report: SyncReport, plan: SyncPlan) -> None:
    """A failed file is counted as failed only, not also as added, changed or unchanged."""
    failed = {failure.path for failure in report.failures}
    report.files_added = len(set(plan.added) - failed)
    report.files_changed = len(set(plan.changed) - failed)
    report.files_unchanged = len(set(plan.unchanged) - failed)
    report.files_failed = len(failed)


def _recording_progress(store: Store, kb: str, progress: Progress | None, report: SyncReport) -> Progress:
    """The caller's progress callback, also writing how far the sync is (files, files written, and chunks
    embedded so far) where searches, status and the admin page can read it."""
    started = time.time()

    def record(done: int, total: int, message: str) -> None:
        write_progress(
            store, kb, SyncProgress(done, total, report.chunks_embedded, report.files_written, round(started, 3))
        )
        if progress:
            progress(done, total, message)

    return record


# ---- preparation ---------------------------------------------------------------------------


def _fingerprints(kb: KBConfig, embedder: Embedder, counter: TokenCounter, layout: int) -> dict[str, object]:
    """What the stored chunks depend on; a change in any of them means a rebuild."""
    chunking = {**kb.chunking.model_dump(), "effective_max_tokens": effective_max_tokens(kb.chunking, counter)}
    fingerprints = {
        "model": embedder.identity.fingerprint(),
        "chunking": chunking,
        "metadata": {"static": kb.metadata, "types": kb.metadata_types()},
        "keyword_analysis": ANALYZER_VERSION,
        "layout": layout,
    }
    if reads_images(kb):  # installing the OCR extra re-reads files (a scan failed before); vectors are reused
        fingerprints["ocr"] = True
    return fingerprints


def _refuse_mass_delete(
    kb: KBConfig, active_files: dict[str, FileRecord], present: set[str], unreadable: list[SkippedFile], allowed: bool
) -> None:
    """A source that suddenly yields no files (or far fewer) is more likely unmounted than emptied."""
    doomed = _gone(active_files, present, unreadable)
    if allowed or not doomed:
        return
    mass = len(doomed) >= MASS_DELETE_MIN_FILES and len(doomed) > kb.sync.max_delete_share * len(active_files)
    if present and not mass:
        return
    why = "its paths yield no files" if not present else f"more than {kb.sync.max_delete_share:.0%} of it is gone"
    raise MassDeleteError(
        f"knowledge base {kb.name!r}: this sync would delete {len(doomed)} of its {len(active_files)} documents "
        f"({why}); nothing was changed. If a drive or share is not mounted (or a site is down), fix that and sync "
        f"again; if the documents were really removed, {sync_remedy(kb.name, '--allow-mass-delete')}."
    )


def _active_manifest(
    store: Store, kb: str, active: str | None, rebuild_asked: bool
) -> tuple[dict[str, FileRecord], bool]:
    """The active generation's manifest, and whether its tables are gone or cannot be opened. A table that
    cannot be opened fails the sync unless a rebuild was asked for: it may be the storage that failed, not
    the table, and a rebuild reads and embeds every source again (then drops the damaged tables)."""
    if active is None:
        return {}, False
    try:
        return store.read_files(kb, active), store.chunk_schema(kb, active) is None
    except StoreError as exc:
        if not rebuild_asked:
            raise StoreError(
                f"{exc}; if its files are damaged, {sync_remedy(kb, '--full')} to rebuild the KB from its sources"
            ) from exc
        log.warning("%s: the index's tables cannot be opened (%s); rebuilding from the sources", kb, exc)
        return {}, True


def _target_generation(  # noqa: PLR0913  # it decides the generation a SyncContext is built with, so comes before one
    store: Store,
    kb: KBConfig,
    embedder: Embedder,
    state: KBState,
    fingerprints: dict[str, object],
    request: SyncRequest,
    missing: bool,
    report: SyncReport,
) -> tuple[str, str | None]:
    """The generation this sync writes, and the one whose vectors it may reuse (none when the active one's
    tables are `missing`).

    Normally the active one. A first sync builds in place (searchable as it fills); a rebuild
    builds a new generation (or resumes an interrupted one with the same settings) while
    searches keep reading the active one.
    """
    active = state.generation
    reason = _rebuild_reason(state, fingerprints, request.full, request.reembed, missing)
    if not reason:  # an interrupted rebuild no longer wanted goes when this sync switches state and drops
        assert active is not None  # no active generation is always a reason to build one
        return active, None
    _check_model(embedder)  # before anything is created, switched or dropped
    schema = chunk_schema(embedder.identity.dimension, kb.metadata_types())
    building = state.building
    if active is None:
        target = new_generation()
        store.drop_generations(kb.name, keep=set())
        store.create_generation(kb.name, target, schema)
        store.write_state(kb.name, KBState.active(fingerprints, target))
        return target, None
    report.rebuilt = reason
    log.info("%s: rebuilding the index beside the current one: %s", kb.name, reason)
    if missing:
        forget_generation(store, kb.name, active)
    if (
        building
        and building.fingerprints == fingerprints
        and store.chunk_schema(kb.name, building.generation) is not None
    ):
        target = building.generation  # resume: its manifest says what is done
    else:
        target = new_generation()
        store.write_state(kb.name, state.building_beside(target, fingerprints))
    store.drop_generations(kb.name, keep={active, target})
    store.create_generation(kb.name, target, schema)
    same_model = state.model == fingerprints["model"] and not missing
    return target, active if same_model and not request.reembed else None


def _check_model(embedder: Embedder) -> None:
    """The model must load and embed a test text before a rebuild starts."""
    import numpy as np  # here, not at the top: a server imports this module before its handshake, numpy after it

    vector = np.asarray(embedder.embed_query("mcp-kb model check"))
    if vector.shape != (embedder.identity.dimension,) or not np.isfinite(vector).all():
        raise ModelError(
            f"the embedding model {embedder.identity.name} returned a vector of shape {vector.shape} "
            f"(expected {embedder.identity.dimension} finite numbers); the index was left as it was"
        )


def _rebuild_reason(state: KBState, fingerprints: dict[str, object], full: bool, reembed: bool, missing: bool) -> str:
    if not state.built:
        return "first sync"
    if missing:
        return "the index tables were missing or could not be opened"
    if reembed:
        return "--reembed requested"
    if full:
        return "--full requested"
    for key, what in (
        ("model", "embedding model"),
        ("chunking", "chunking settings"),
        ("metadata", "metadata settings"),
        ("keyword_analysis", "keyword analysis"),
        ("layout", "index layout"),
        ("ocr", "reading images (OCR)"),
    ):
        if state.fingerprint(key) != fingerprints.get(key):
            return f"{what} changed ({_describe(state.fingerprint(key))} → {_describe(fingerprints.get(key))})"
    return ""


def _describe(value: Any) -> str:
    if isinstance(value, dict) and "name" in value:
        return f"{value['name']}, {value['dimension']}-d"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)[:120]


def _hash_files(files: list[SourceFile], known: dict[str, FileRecord]) -> tuple[dict[str, str], dict[str, str]]:
    """SHA-256 per file, re-using a stored hash when size and mtime are unchanged.

    Returns the hashes and, for files that could not be read, the reason.
    """
    hash_by_path = {}
    failures = {}
    for source in files:
        record = known.get(source.doc_id)
        if record and record.file_hash and record.size == source.size and record.mtime_ns == source.mtime_ns:
            hash_by_path[source.doc_id] = record.file_hash
            continue
        try:
            hash_by_path[source.doc_id] = file_sha256(source.ready())
        except OSError as exc:
            failures[source.doc_id] = f"unreadable: {exc.strerror or exc}"
    return hash_by_path, failures


def _keep_unreadable(
    indexed: dict[str, FileRecord],
    hash_by_path: dict[str, str],
    unreadable: list[SkippedFile],
    hash_failures: dict[str, str],
    report: SyncReport,
) -> None:
    """A file (or folder) that cannot be read right now keeps what the generation being written holds
    for it. A rebuild's new generation holds nothing yet (old vectors may not fit a new model), so
    there such a file is reported and left out until it can be read."""
    for path, record in indexed.items():
        reason = hash_failures.get(path) or next((s.reason for s in unreadable if s.covers(path)), None)
        if reason and path not in hash_by_path:
            hash_by_path[path] = record.file_hash
            report.failures.append(Problem(path, f"{reason}; the indexed version is kept"))
    report.failures += [Problem(p, r) for p, r in hash_failures.items() if p not in indexed]


def _touched(
    indexed: dict[str, FileRecord], files_by_path: dict[str, SourceFile], hash_by_path: dict[str, str]
) -> list[FileRecord]:
    """Records of files whose bytes are unchanged but whose size/mtime moved, with the new values."""
    touched = []
    for path, record in indexed.items():
        source = files_by_path.get(path)
        if (
            source
            and hash_by_path.get(path) == record.file_hash
            and (record.size, record.mtime_ns) != (source.size, source.mtime_ns)
        ):
            touched.append(replace(record, size=source.size, mtime_ns=source.mtime_ns))
    return touched


# ---- applying changes ----------------------------------------------------------------------


def _apply_changes(
    context: SyncContext, todo: list[SourceFile], hash_by_path: dict[str, str], engine: SyncEngineConfig
) -> None:
    """Parse, embed and write new and changed files, one batch per commit; parsing (in worker processes)
    runs a batch ahead."""
    kb, report, timer = context.kb, context.report, context.timer
    batches = sliced(todo, BATCH_FILES)
    done = 0

    def parse_batch(batch: Sequence[SourceFile]) -> tuple[list[ParsedFile], float]:
        watch = Stopwatch()
        outcomes = workers.parse([parse_job(source, kb) for source in batch])
        report.worker_peak_mb = parsing_peak_mb(outcomes, report.worker_peak_mb)
        return parsed_files([(source, hash_by_path[source.doc_id]) for source in batch], outcomes), watch.seconds

    # The workers end first when the sync stops: the batch parsing ahead is abandoned, not waited for.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-kb-parse-ahead") as pool,
        ParseWorkers(engine, context.counter, len(todo)) as workers,
    ):
        pending = pool.submit(parse_batch, batches[0])
        for index in range(len(batches)):
            parsed, parse_seconds = pending.result()
            timer.add("parse", parse_seconds)
            if index + 1 < len(batches):
                pending = pool.submit(parse_batch, batches[index + 1])

            def embedding(embedded: int, total: int) -> None:  # progress moves while a batch embeds
                files = done + len(parsed) * embedded // max(total, 1)
                context.indexed(files, len(todo), f"embedding {embedded}/{total} chunks of this batch")

            _write_batch(context, parsed, embedding)
            done += len(parsed)
            context.indexed(done, len(todo))


def reads_images(kb: KBConfig) -> bool:
    """Whether this KB's syncs read text from images: OCR is not off and its engine is installed."""
    return kb.ocr_on and ocr_available()


def _write_batch(context: SyncContext, parsed: list[ParsedFile], embedding: EmbeddingProgress) -> None:
    """Embed and write a parsed batch, one commit each COMMIT_SECONDS of embedding and one for the rest."""
    kb, report = context.kb, context.report
    unwritten = list(parsed)
    try:
        for piece, rows_by_path in embedded_pieces(context, parsed, embedding, every=COMMIT_SECONDS):
            _write_piece(context, piece, rows_by_path)
            count_batch(kb, piece, report)
            unwritten = unwritten[len(piece) :]
            report.files_written += len(piece)
    except ModelError as exc:
        not_indexed(kb, unwritten, exc, report)


def _write_piece(
    context: SyncContext, piece: list[ParsedFile], rows_by_path: dict[str, list[dict[str, object]]]
) -> None:
    """Files whose chunks are embedded, in one commit: chunks, reading forms, then their manifest records."""
    store, kb, target = context.store, context.kb.name, context.target
    with context.timer("write"):
        refused = store.write_chunks(kb, target, rows_by_path)
        refuse(piece, refused)
        write_readings(store, kb, target, piece)
        store.write_files(kb, target, written_records(piece))


def _remove_deleted(store: Store, kb: str, target: str, plan: SyncPlan, on_disk: set[str]) -> int:
    """Delete chunks and reading forms of deleted files and orphans (those whose file the manifest lost)."""
    orphans = store.indexed_paths(kb, target) - on_disk
    deleted = store.delete_documents(kb, target, sorted(orphans | set(plan.deleted)))
    store.delete_readings(kb, target, sorted((store.reading_paths(kb, target) - on_disk) | set(plan.deleted)))
    store.delete_files(kb, target, plan.deleted)
    return deleted


# ---- bookkeeping ---------------------------------------------------------------------------


def _summary(files: dict[str, FileRecord], report: SyncReport, titles: list[str]) -> KBSummary:
    """What the KB holds, for tool descriptions: counts by kind and a few document titles."""
    kinds = count_kinds(path for path, record in files.items() if record.status == "indexed")
    return KBSummary(sum(kinds.values()), dict(kinds.most_common()), report.chunks_total, tuple(titles))


def _record_failure(store: Store, started: str, error: str, report: SyncReport, outcome: str = "failed") -> None:
    """Keep the fingerprints of the last good build; record the failed (or interrupted) attempt (of the KB its
    report names) for `status`."""
    kb = report.kb
    try:
        store.write_state(kb, store.read_state(kb).ended(started, outcome, report, error))
    except Exception:  # the store itself may be what failed; the original error is what matters
        log.debug("could not record the failed sync of %s", kb, exc_info=True)
