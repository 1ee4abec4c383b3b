"""Model identities remembered across processes, so that a command that embeds nothing (`status`, a sync
with nothing to index) neither imports the model's runtime nor hashes its weights (470 MB for the
multilingual default) only to learn what the index already records.

A remembered identity holds while the weights file is the one it was worked out from: the same inode,
size, modification and change times (the trust digest.model_file_sha256 puts in them within one
process, and a sync in a document's size and modification time). A cache that cannot be read or written
only costs the work again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..settings import cache_root
from .base import ModelIdentity

_FILE_NAME = "model-identities.json"
_KEEP = 32  # identities kept; the oldest is forgotten first


def remembered_identity(key: str, folder: Path | None = None) -> ModelIdentity | None:
    """The identity remembered for `key`, while its weights file is unchanged; None otherwise."""
    record = _records(folder).get(key)
    try:
        if record is None or _file_version(Path(record["file"])) != record["version"]:
            return None
        return ModelIdentity(str(record["name"]), int(record["dimension"]), str(record["file_hash"]))
    except (OSError, KeyError, TypeError, ValueError):  # the file is gone, or the record is not ours
        return None


def remember_identity(key: str, identity: ModelIdentity, weights: Path, folder: Path | None = None) -> None:
    """Remember `identity`, worked out from the weights file `weights` (best effort)."""
    try:
        version = _file_version(weights)
    except OSError:
        return
    records = {name: record for name, record in _records(folder).items() if name != key}
    records[key] = {"name": identity.name, "dimension": identity.dimension, "file_hash": identity.file_hash,
                    "file": str(weights.resolve()), "version": version}
    _write(dict(list(records.items())[-_KEEP:]), folder or cache_root())


def _file_version(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _records(folder: Path | None) -> dict[str, Any]:
    try:
        records = json.loads(((folder or cache_root()) / _FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _write(records: dict[str, Any], folder: Path) -> None:
    """Replace the file whole (a reader sees the old one or the new one)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{_FILE_NAME}.")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(records, out)
        os.replace(temporary, folder / _FILE_NAME)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
