"""Hashes: of files (what sync compares and what identifies a model file), and the short keys that name a cache
folder, a copy or a stored id after what it holds."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


def short_key(value: str | bytes, digits: int = 16) -> str:
    """The first `digits` hex digits of the SHA-256 of `value` (text as UTF-8): a name that stands for a longer one;
    16 digits (64 bits) keep apart any set of names one machine holds."""
    data = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()[:digits]


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_file_sha256(path: Path) -> str:
    """file_sha256 of a model file, computed once per process while the file stays as it was (same inode, size,
    modification and change times): the weights are hashed to find their int8 copy, to check it and for the
    index's identity, hundreds of megabytes each time."""
    stat = path.stat()
    return _remembered_sha256(path.resolve(), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@functools.lru_cache(maxsize=16)
def _remembered_sha256(path: Path, *_version: int) -> str:
    return file_sha256(path)
