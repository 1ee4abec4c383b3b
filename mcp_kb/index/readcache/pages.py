"""Pages on disk: the immutable files' bytes kept in fixed pages, with a record per object (size, ETag),
shared by the processes of a machine, bounded in bytes (least recently used evicted first)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ...digest import short_key
from ...files import write_atomically

log = logging.getLogger(__name__)

PAGE_BYTES = 64 * 1024  # a miss fetches whole pages: a few fetches warm a file lance reads in many small ranges
_WARNING_INTERVAL = 60.0  # seconds between repeats of the same cache warning
_TOUCH_INTERVAL = 60.0  # seconds: how fresh a page's "last used" time is kept
_MAX_REMEMBERED = 100_000  # objects' records and pages' use times held in memory, each ~100 bytes


@dataclass(frozen=True)
class ObjectMeta:
    """An object's record beside its pages: its size, and the version (ETag) and date the store gave it."""

    size: int
    etag: str
    last_modified: str

    def as_dict(self) -> dict[str, object]:
        return {"size": self.size, "etag": self.etag, "last-modified": self.last_modified}


class PageStore:
    """Pages of immutable objects in a folder, bounded in size, least recently used evicted first.

    A page file is its bytes behind a CRC-32, written to a temporary name and renamed, so a reader
    (of this or another process sharing the folder) sees a whole page or none, and a damaged one is
    recognised and dropped. An object's size, ETag and date sit beside its pages in a small record.
    """

    def __init__(self, folder: Path, max_bytes: int):
        self.folder, self.max_bytes = folder, max_bytes
        self._lock = threading.Lock()
        self._used: int | None = None  # bytes in the folder, counted on first need
        self._warned: dict[str, float] = {}
        # Kept in memory too: a hit reads no record, and marks a page used once a minute, not on every read.
        self._metas: dict[str, ObjectMeta] = {}
        self._touched: dict[str, float] = {}

    def _object_folder(self, bucket: str, key: str) -> str:
        digest = hashlib.sha256(f"{bucket}/{key}".encode()).hexdigest()
        return os.path.join(self.folder, digest[:2], digest)

    def meta(self, bucket: str, key: str) -> ObjectMeta | None:
        known = self._metas.get(f"{bucket}/{key}")
        if known is not None:
            return known
        try:
            with open(os.path.join(self._object_folder(bucket, key), "meta.json"), "rb") as file:
                record = json.loads(file.read())
        except (OSError, ValueError):
            return None
        if not (isinstance(record, dict) and isinstance(record.get("size"), int) and record.get("etag")):
            return None
        meta = ObjectMeta(record["size"], str(record["etag"]), str(record.get("last-modified", "")))
        self._remember(bucket, key, meta)
        return meta

    def _remember(self, bucket: str, key: str, meta: ObjectMeta) -> None:
        if len(self._metas) > _MAX_REMEMBERED:
            self._metas.clear()
        self._metas[f"{bucket}/{key}"] = meta

    def page(self, bucket: str, key: str, meta: ObjectMeta, number: int) -> bytes | None:
        path = os.path.join(self._object_folder(bucket, key), f"{_etag_name(meta)}-{number}")
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            return None
        body = data[4:]
        intact = len(data) >= 4 and zlib.crc32(body) == int.from_bytes(data[:4], "big")
        if not intact or len(body) != page_length(meta, number):
            self.warn("damaged", f"read cache: dropped a damaged page of {key}; reading it from the store")
            _unlink(Path(path))
            return None
        self._mark_used(path)
        return body

    def _mark_used(self, path: str) -> None:
        """Eviction goes by modification time: refresh it, at most once a minute per page."""
        now = time.monotonic()
        if now - self._touched.get(path, -_TOUCH_INTERVAL) < _TOUCH_INTERVAL:
            return
        if len(self._touched) > _MAX_REMEMBERED:
            self._touched.clear()
        self._touched[path] = now
        try:
            os.utime(path)
        except OSError:
            pass

    def put(self, bucket: str, key: str, meta: ObjectMeta, pages: dict[int, bytes]) -> None:
        """Keep these pages (and the object's record); a full or vanished disk only costs the caching."""
        folder = Path(self._object_folder(bucket, key))
        self._remember(bucket, key, meta)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomically(folder / "meta.json", json.dumps(meta.as_dict()).encode())
            for number, body in pages.items():
                write_atomically(folder / f"{_etag_name(meta)}-{number}", zlib.crc32(body).to_bytes(4, "big") + body)
        except OSError as exc:
            self.warn(
                "write",
                f"read cache: cannot keep pages in {self.folder} ({exc.strerror or exc}); reading from the store",
            )
            return
        self._account(sum(len(body) + 4 for body in pages.values()))

    def _account(self, added: int) -> None:
        with self._lock:
            self._used = self._count() if self._used is None else self._used + added
            if self._used <= self.max_bytes:
                return
            self._used = self._count()  # other processes may share the folder: count what is really there
            if self._used > self.max_bytes:
                self._used = self._evict(int(self.max_bytes * 0.8))

    def _files(self) -> list[tuple[os.stat_result, Path]]:
        """Page files with their stat, temporary ones too (a killed process's leftovers take space as well)."""
        found = []
        for path in self.folder.glob("??/*/*"):
            if path.name != "meta.json":
                try:
                    found.append((path.stat(), path))
                except OSError:
                    pass
        return found

    def _count(self) -> int:
        return sum(stat.st_size for stat, _ in self._files())

    def _evict(self, target: int) -> int:
        files = sorted(self._files(), key=lambda item: item[0].st_mtime)
        used = sum(stat.st_size for stat, _ in files)
        emptied = set()
        for stat, path in files:
            if used <= target:
                break
            _unlink(path)
            used -= stat.st_size
            emptied.add(path.parent)
        for folder in emptied:
            _drop_if_pageless(folder)
        return used

    def warn(self, what: str, message: str) -> None:
        """Say it once a minute at most: a broken disk must not flood the log."""
        now = time.monotonic()
        if now - self._warned.get(what, -_WARNING_INTERVAL) >= _WARNING_INTERVAL:
            self._warned[what] = now
            log.warning(message)


def _etag_name(meta: ObjectMeta) -> str:
    """Pages are named by the object's version too: bytes of another version are never taken for these."""
    return short_key(meta.etag)


def page_length(meta: ObjectMeta, number: int) -> int:
    return max(0, min(PAGE_BYTES, meta.size - number * PAGE_BYTES))


def _drop_if_pageless(folder: Path) -> None:
    """An object whose pages are all evicted loses its record and folder too, or records would pile up as
    compactions replace files. A page another process writes meanwhile keeps the folder (rmdir fails);
    without its record it is fetched again and the record rewritten."""
    try:
        if any(path.name != "meta.json" for path in folder.iterdir()):
            return
        _unlink(folder / "meta.json")
        folder.rmdir()
    except OSError:
        pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
