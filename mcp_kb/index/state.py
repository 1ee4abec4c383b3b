"""Sync state beside an index: the writer lock, how far a running sync is, and small records.

Where each lives decides who can see it:
- in the store (every machine pointed at the index sees the same): the KB state row (generation,
  model, last sync report; index/state_table.py), the summary, the latest health check, and on object
  storage the writer lease with the running sync's progress;
- on this machine only: for an index in a folder, the writer lock (an OS file lock, released by a
  crash at once) and the progress file; everywhere, caches (the summary, so a server describes its
  tools without opening LanceDB; crawled web pages), this process's search metrics and the query log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import filelock

from ..settings import cache_root, is_remote_uri
from ..digest import short_key
from ..errors import RunningSync, StoreError, SyncBusyError
from ..files import write_atomically
from ..records import HealthCheck, KBSummary, SearchFigures, SyncProgress, recorded_now
from .contract import Store, SyncHolder

log = logging.getLogger(__name__)


def local_state_dir(storage: str) -> Path:
    """Where this machine's files about an index live: the index folder itself, or a folder in this
    machine's cache keyed by the location for a remote LanceDB URI and for a folder this process
    cannot write (a read-only mount or snapshot)."""
    if not _records_beside_index(storage):
        key = short_key(storage)
        return cache_root() / key
    return Path(storage)


def _records_beside_index(storage: str) -> bool:
    """Whether this machine keeps its records in the index folder itself (a folder it may write)."""
    return not is_remote_uri(storage) and is_writable_folder(storage)


def is_writable_folder(storage: str) -> bool:
    """Whether this process may write an index in this folder (or create it: its nearest existing parent)."""
    path = Path(storage)
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.access(path, os.W_OK)


def check_writable(store: Store) -> None:
    """A sync needs to write its index: a read-only folder is one clear error, before anything starts."""
    if not store.is_remote and not is_writable_folder(store.uri):
        raise StoreError(
            f"the index folder {store.uri} is not writable (a read-only mount or snapshot?): "
            f"searches and status read it, but sync where it can be written, or set storage to "
            f"another folder"
        )


# ---- records in the store ---------------------------------------------------------------------


def write_summary(store: Store, kb: str, summary: KBSummary) -> None:
    """A few counts about a KB (documents by kind, chunks, titles) for tool descriptions: in the
    store, and in a local file a server reads without opening LanceDB."""
    store.write_note(kb, summary)
    _write_json(_kb_file(store.uri, kb, "summary"), summary.as_dict())


def read_summary(storage: str, kb: str, store: Callable[[], Store]) -> KBSummary | None:
    """For an index in a folder this machine writes, the local copy (read without opening LanceDB);
    else the store's record (on object storage another machine may have synced; a read-only folder
    was synced elsewhere). None before a sync has written one."""
    if not _records_beside_index(storage):
        return store().read_note(kb, KBSummary)
    saved = _read_json(_kb_file(storage, kb, "summary"))
    return KBSummary.from_dict(saved) if saved else None


def write_health(store: Store, kb: str, health: HealthCheck) -> None:
    """The latest label-free hit rates of a KB; a machine that may not write to the store says so."""
    try:
        store.write_note(kb, health)
    except Exception as exc:  # e.g. read-only credentials on a reader: the figures were still shown
        log.warning("%s: the health check could not be saved in the index: %s", kb, exc)


def read_health(store: Store, kb: str) -> HealthCheck | None:
    """The latest health check of a KB (None: never checked)."""
    return store.read_note(kb, HealthCheck)


# ---- this machine's files ---------------------------------------------------------------------


def write_metrics(storage: str, kb: str, metrics: SearchFigures) -> None:
    """The search metrics of the process that last answered for a KB on this machine, for `mcp-kb stats`;
    a record, so failing to write it (a full disk) never fails the search that produced it."""
    try:
        _write_json(_kb_file(storage, kb, "metrics"), metrics.as_dict())
    except OSError as exc:
        log.warning("%s: search metrics not saved: %s", kb, exc.strerror or exc)


def read_metrics(storage: str, kb: str) -> SearchFigures | None:
    """The search metrics saved on this machine for a KB (None: no answering process saved any)."""
    saved = _read_json(_kb_file(storage, kb, "metrics"))
    return SearchFigures.from_dict(saved) if saved else None


def query_log_path(storage: str, kb: str) -> Path:
    """Where a KB's query log goes when it is on (`[kb.search] query_log`)."""
    return local_state_dir(storage) / f"{kb}.queries.jsonl"


def source_cache_dir(storage: str, kb: str) -> Path:
    """What a KB's sources download on this machine (web pages: bodies and validators for conditional
    requests); a cache: without it each page is downloaded once more, never re-embedded."""
    return local_state_dir(storage) / "web" / kb


def _kb_file(storage: str, kb: str, kind: str) -> Path:
    return local_state_dir(storage) / f"{kb}.{kind}.json"


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    """Replace the file in one step, so a reader never sees half of it (nor two writers one temporary file)."""
    write_atomically(path, json.dumps(data).encode("utf-8"))


def _read_json(path: Path) -> dict[str, object]:
    """A record this module wrote (as json.loads hands it over), or {} when it is missing, unreadable or not a JSON
    object."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


# ---- the writer lock and a running sync's progress --------------------------------------------


@contextlib.contextmanager
def sync_lock(store: Store, kbs: list[str], wait: bool = True, poll_seconds: float = 0.2) -> Iterator[None]:
    """One writer per index across processes and machines: an OS file lock beside an index in a
    folder, a lease in the store on object storage. A second writer waits, or with `wait=False`
    fails at once with a message naming the holder."""
    holder = SyncHolder(uuid.uuid4().hex, os.getpid(), socket.gethostname(), tuple(kbs), recorded_now())
    lock = _StoreLease(store, holder) if store.is_remote else _FileLock(store.uri, holder)
    if store.is_remote:  # each look is a request to the store
        poll_seconds = max(poll_seconds, 1.0)
    announced = False
    while not lock.acquire():
        if not wait:
            raise SyncBusyError(
                running_sync(store),
                "try again when it ends, or wait for it (the sync tool's `wait`, or `mcp-kb sync` without --no-wait)",
            )
        if not announced:
            log.warning("waiting: %s", running_sync(store).sentence())
            announced = True
        time.sleep(poll_seconds)
    try:
        yield
    finally:
        try:
            lock.release()
        except Exception as exc:  # never in place of the sync's own outcome: an unreleased lease lapses by itself
            log.warning("the writer lock could not be released (%s); it lapses after [storage] lease_seconds", exc)


def is_sync_running(store: Store, kb: str | None = None) -> bool:
    """Whether some process (on any machine, for object storage) holds the index's writer lock; with
    `kb`, whether that sync is syncing this KB (a sync of another KB of the index does not count)."""
    holder = _running_holder(store)
    return holder is not None and (kb is None or holder.syncs(kb))


def sync_activity(store: Store, kb: str) -> SyncProgress | None:
    """None when no sync of this KB runs; else how far it is (not `counted` before its first batch). What a
    search or a status asks: the lock and the progress record stay this module's business."""
    running = is_sync_running(store, kb)
    return read_progress(store, kb, running=True) if running else None


def _running_holder(store: Store) -> SyncHolder | None:
    """What the holder of the writer lock wrote about itself, or None when no sync runs.

    Readers (searches, status) never take the lock, not even for an instant, which would make a
    sync starting at that moment wait or fail: the holder record says which process holds it,
    and on this machine whether that process lives is asked of the OS."""
    if store.is_remote:
        return store.lease_holder()
    holder = _read_holder(store.uri)
    if holder is None:
        return None
    if holder.host == socket.gethostname():
        return holder if _is_alive(holder.pid) else None  # a killed sync left its record behind
    return _probed_holder(store, holder)  # another machine sharing the folder: only the lock can tell


def _is_alive(pid: int | None) -> bool:
    """Whether a process of this machine lives (psutil: `os.kill(pid, 0)` would send CTRL_C on Windows). A
    killed process its parent has not reaped yet is a zombie: it counts as gone."""
    if pid is None or pid <= 0:
        return False
    import psutil  # asked only when a holder record exists (its Linux part imports `resource`)

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # alive, and someone else's
        return True


def _probed_holder(store: Store, holder: SyncHolder) -> SyncHolder | None:
    path = _lock_path(store.uri)
    if not path.exists():
        return None
    lock = filelock.FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        return holder
    lock.release()
    return None


def running_sync(store: Store) -> RunningSync:
    """The sync holding the lock: since when, which process on which host, how far."""
    holder = (store.lease_holder() if store.is_remote else None) or _read_holder(store.uri)
    if holder is None:
        return RunningSync()
    kbs = holder.kbs or ()
    progress = tuple((kb, p.done, p.total) for kb in kbs if (p := read_progress(store, kb, running=True)).counted)
    pid = "?" if holder.pid is None else str(holder.pid)
    return RunningSync(kbs, holder.started_at or "?", pid, holder.host or "?", progress)


def write_progress(store: Store, kb: str, progress: SyncProgress) -> None:
    """How far the running sync of a KB is, for searches, status and the admin page."""
    if store.is_remote:
        _StoreLease.progress(store, kb, progress)
    else:
        _write_json(_kb_file(store.uri, kb, "progress"), progress.as_dict())


def clear_progress(store: Store, kb: str) -> None:
    if not store.is_remote:  # a lease's progress goes with the lease
        _kb_file(store.uri, kb, "progress").unlink(missing_ok=True)


def read_progress(store: Store, kb: str, running: bool | None = None) -> SyncProgress:
    """The running sync's progress, all zero when no sync runs (a killed one's record is ignored).
    `running`: what the caller already knows of the lock, to spare a second look."""
    if store.is_remote:
        holder = store.lease_holder()
        return holder.progress.get(kb, SyncProgress()) if holder else SyncProgress()
    running = is_sync_running(store, kb) if running is None else running
    return SyncProgress.from_dict(_read_json(_kb_file(store.uri, kb, "progress")) if running else {})


class _FileLock:
    """An index in a folder: an OS lock file beside it (any crash releases it at once)."""

    def __init__(self, storage: str, holder: SyncHolder):
        self.storage, self.holder = storage, holder
        path = _lock_path(storage)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = filelock.FileLock(str(path), thread_local=False)

    def acquire(self) -> bool:
        try:
            self.lock.acquire(timeout=0)
        except filelock.Timeout:
            return False
        _write_json(_holder_path(self.storage), self.holder.as_dict())
        return True

    def release(self) -> None:
        _holder_path(self.storage).unlink(missing_ok=True)  # first: readers judge by the record alone
        self.lock.release()


class _StoreLease:
    """An index on object storage: a lease row in the store, renewed by a heartbeat thread; a
    crashed holder's lease lapses after the store's `lease_seconds`."""

    _held: dict[str, _StoreLease] = {}  # by store URI: the lease this process holds, for progress records

    def __init__(self, store: Store, holder: SyncHolder):
        self.store, self.holder = store, holder
        self.lost = False  # a renewal found another holder: this sync must stop writing
        self.stop = threading.Event()
        self.progress_by_kb: dict[str, SyncProgress] = {}
        self.thread: threading.Thread | None = None

    def acquire(self) -> bool:
        if self.store.take_lease(self.holder) is not None:
            return False
        _StoreLease._held[self.store.uri] = self
        self.thread = threading.Thread(target=self._beat, name="mcp-kb-lease", daemon=True)
        self.thread.start()
        return True

    def release(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join()
        _StoreLease._held.pop(self.store.uri, None)
        self.store.release_lease(self.holder.id)

    @classmethod
    def progress(cls, store: Store, kb: str, progress: SyncProgress) -> None:
        lease = cls._held.get(store.uri)
        if lease:
            lease.progress_by_kb[kb] = progress
            lease._renew()
            if lease.lost:  # checked between batches, so a sync that lost its lease stops before its next commit
                raise SyncBusyError(
                    None,
                    "this sync lost the writer lease (its renewals did not reach the store "
                    "for longer than lease_seconds) and stopped; sync again to finish",
                )

    def _beat(self) -> None:
        while not self.stop.wait(self.store.lease_seconds / 3):
            self._renew()

    def _renew(self) -> None:
        try:
            self.lost = self.lost or not self.store.renew_lease(self.holder.id, self.progress_by_kb)
        except Exception as exc:  # a network hiccup: the next beat tries again (the lease lasts three)
            log.warning("could not renew the writer lease: %s: %s", type(exc).__name__, exc)


def _read_holder(storage: str) -> SyncHolder | None:
    """The holder record beside an index in a folder, None when there is none."""
    saved = _read_json(_holder_path(storage))
    return SyncHolder.from_dict(saved) if saved else None


def _lock_path(storage: str) -> Path:
    return local_state_dir(storage) / ".sync.lock"


def _holder_path(storage: str) -> Path:
    return local_state_dir(storage) / ".sync.holder.json"
