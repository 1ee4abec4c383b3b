"""Sync state kept beside an index: the writer lock, and small summaries readable without LanceDB.

Both sync (which writes) and search and the server (which read) use this module, so reading never
imports the write path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock
import platformdirs

from ..errors import SyncBusyError

log = logging.getLogger(__name__)


def local_state_dir(storage: str) -> Path:
    """Where small local files about an index live (sync lock, summaries): the index folder itself,
    or for a remote LanceDB URI a folder in this machine's cache keyed by the URI."""
    if "://" in storage:
        key = hashlib.sha256(storage.encode()).hexdigest()[:16]
        return Path(platformdirs.user_cache_dir("mcp-kb", appauthor=False)) / key
    return Path(storage)


def write_summary(storage: str, kb: str, summary: dict[str, Any]) -> None:
    """A few counts about a KB, readable without opening LanceDB (servers describe tools with it)."""
    _write_json(_kb_file(storage, kb, "summary"), summary)


def read_summary(storage: str, kb: str) -> dict[str, Any]:
    return _read_json(_kb_file(storage, kb, "summary"))


def write_metrics(storage: str, kb: str, metrics: dict[str, Any]) -> None:
    """The search metrics of the process that last answered for a KB, for `mcp-kb stats`."""
    _write_json(_kb_file(storage, kb, "metrics"), metrics)


def read_metrics(storage: str, kb: str) -> dict[str, Any]:
    return _read_json(_kb_file(storage, kb, "metrics"))


def write_health(storage: str, kb: str, health: dict[str, Any]) -> None:
    """The latest label-free hit rates of a KB (`mcp-kb eval --self`, or the check after a rebuild)."""
    _write_json(_kb_file(storage, kb, "health"), health)


def read_health(storage: str, kb: str) -> dict[str, Any]:
    return _read_json(_kb_file(storage, kb, "health"))


def query_log_path(storage: str, kb: str) -> Path:
    """Where a KB's query log goes when it is on (`[kb.search] query_log`)."""
    return local_state_dir(storage) / f"{kb}.queries.jsonl"


def web_cache_dir(storage: str, kb: str) -> Path:
    """Where the pages a KB's web sources crawled are kept (bodies and validators for conditional
    requests); a cache: without it each page is downloaded once more, never re-embedded."""
    return local_state_dir(storage) / "web" / kb


def write_progress(storage: str, kb: str, done: int, total: int) -> None:
    """How far the running sync of a KB is (files done of files to index), for searches and status."""
    _write_json(_kb_file(storage, kb, "progress"), {"done": done, "total": total})


def clear_progress(storage: str, kb: str) -> None:
    _kb_file(storage, kb, "progress").unlink(missing_ok=True)


def read_progress(storage: str, kb: str, running: bool | None = None) -> dict[str, Any]:
    """The running sync's progress, or {} when no sync runs (a killed one's file is ignored).
    `running`: what the caller already knows of the lock, to spare a second look."""
    running = is_sync_running(storage) if running is None else running
    return _read_json(_kb_file(storage, kb, "progress")) if running else {}


def _kb_file(storage: str, kb: str, kind: str) -> Path:
    return local_state_dir(storage) / f"{kb}.{kind}.json"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace the file in one step, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data), encoding="utf-8")
    temporary.replace(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def sync_lock(storage: str, kbs: list[str], wait: bool = True,
              poll_seconds: float = 0.2) -> Iterator[None]:
    """One writer per storage location across processes (an OS file lock beside the index, on every
    platform); the holder is described in a file beside it, for the message a second writer gets."""
    path = _lock_path(storage)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path), thread_local=False)
    announced = False
    while True:
        try:
            lock.acquire(timeout=0)
            break
        except filelock.Timeout:
            if not wait:
                raise SyncBusyError(f"{running_sync(storage)}; try again when it ends, or wait for it "
                                    f"(the sync tool's `wait`, or `mcp-kb sync` without --no-wait)") from None
            if not announced:
                log.warning("waiting: %s", running_sync(storage))
                announced = True
            time.sleep(poll_seconds)
    try:
        _write_json(_holder_path(storage), {"pid": os.getpid(), "host": socket.gethostname(), "kbs": kbs,
                                            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z")})
        yield
    finally:
        lock.release()


def is_sync_running(storage: str) -> bool:
    """Whether some process holds the sync lock of this storage right now."""
    path = _lock_path(storage)
    if not path.exists():
        return False
    lock = filelock.FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        return True
    lock.release()
    return False


def running_sync(storage: str) -> str:
    """A sentence about the sync holding the lock: since when, which process, how far each KB is."""
    holder = _read_json(_holder_path(storage))
    if not holder:
        return "a sync is already running on this index"
    done = [f"{kb}: {p['done']} of {p['total']} files" for kb in holder.get("kbs", [])
            if (p := read_progress(storage, kb, running=True))]
    return (f"a sync of {', '.join(holder.get('kbs', [])) or 'this index'} is already running (started "
            f"{holder.get('started_at', '?')} by process {holder.get('pid', '?')} on {holder.get('host', '?')}"
            f"{'; ' + ', '.join(done) if done else ''})")


def _lock_path(storage: str) -> Path:
    return local_state_dir(storage) / ".sync.lock"  # for a remote URI: a lock per machine only


def _holder_path(storage: str) -> Path:
    return local_state_dir(storage) / ".sync.holder.json"
