"""Sync state kept beside an index: the writer lock, and small summaries readable without LanceDB.

Both sync (which writes) and search and the server (which read) use this module, so reading never
imports the write path.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    _write_json(local_state_dir(storage) / f"{kb}.summary.json", summary)


def read_summary(storage: str, kb: str) -> dict[str, Any]:
    return _read_json(local_state_dir(storage) / f"{kb}.summary.json")


def write_progress(storage: str, kb: str, done: int, total: int) -> None:
    """How far the running sync of a KB is (files done of files to index), for searches and status."""
    _write_json(local_state_dir(storage) / f"{kb}.progress.json", {"done": done, "total": total})


def clear_progress(storage: str, kb: str) -> None:
    (local_state_dir(storage) / f"{kb}.progress.json").unlink(missing_ok=True)


def read_progress(storage: str, kb: str) -> dict[str, Any]:
    """The running sync's progress, or {} when no sync of this KB runs (a killed one's file is ignored)."""
    return _read_json(local_state_dir(storage) / f"{kb}.progress.json") if is_sync_running(storage) else {}


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
def sync_lock(storage: str, wait: bool = True, poll_seconds: float = 0.2) -> Iterator[None]:
    """One writer per storage location across processes (an flock on a file beside the index)."""
    path = _lock_path(storage)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read_holder(path)
                if not wait:
                    raise SyncBusyError(f"a sync is already running on {storage} ({holder}); try again when it ends") from None
                if not announced:
                    log.warning("waiting for another sync on %s (%s)", storage, holder)
                    announced = True
                time.sleep(poll_seconds)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_sync_running(storage: str) -> bool:
    """Whether some process holds the sync lock of this storage right now."""
    path = _lock_path(storage)
    if not path.exists():
        return False
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _lock_path(storage: str) -> Path:
    return local_state_dir(storage) / ".sync.lock"  # for a remote URI: a lock per machine only


def _read_holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "another process"
    except OSError:
        return "another process"
