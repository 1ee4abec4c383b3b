"""Content hashes of files: what sync compares and what identifies a model file."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


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
