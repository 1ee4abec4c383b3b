"""Local models remembered across processes (identity and folder), so that a command that embeds nothing
(`status`, a sync with nothing to index) neither imports the model's runtime, to find the model in its
cache, nor hashes its weights (470 MB for the multilingual default) only to learn what the index records.

A remembered identity holds while the weights files are the ones it was worked out from (an int8 copy's
and its fp32 source's): the same inode, size, modification and change times (the trust
digest.model_file_sha256 puts in them within one process, and a sync in a document's size and
modification time). A cache that cannot be read or written only costs the work again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_atomically
from ..settings import cache_root
from .base import ModelIdentity
from .onnx_session import Recipe

_FILE_NAME = "model-identities.json"
_KEEP = 32  # identities kept; the oldest is forgotten first


@dataclass(frozen=True)
class RememberedModel:
    identity: ModelIdentity
    folder: Path  # the model's folder: its weights and its tokenizer
    recipe: Recipe | None  # how to run it without fastembed (onnx_session.py); None: only fastembed can


def remembered_model(key: str, cache: Path | None = None) -> RememberedModel | None:
    """The model remembered for `key`, while its weights files are unchanged; None otherwise."""
    record = _records(cache).get(key)
    try:
        # A record without "recipe" was written before recipes were: worked out again, once.
        if (
            record is None
            or "recipe" not in record
            or any(_file_version(Path(file)) != version for file, version in record["files"])
        ):
            return None
        identity = ModelIdentity(str(record["name"]), int(record["dimension"]), str(record["file_hash"]))
        recipe = Recipe.from_dict(record["recipe"]) if record["recipe"] is not None else None
        return RememberedModel(identity, Path(record["folder"]), recipe)
    except (OSError, KeyError, TypeError, ValueError):  # the file is gone, or the record is not ours
        return None


def remember_model(key: str, model: RememberedModel, weights: Sequence[Path], cache: Path | None = None) -> None:
    """Remember the `model` (its identity, worked out from the `weights` files; the folder of its files, its
    tokenizer's; the recipe that runs it without fastembed), while those files are unchanged (best effort)."""
    identity, folder, recipe = model.identity, model.folder, model.recipe
    try:
        files = [[str(file.resolve()), _file_version(file)] for file in weights]
    except OSError:
        return
    records = {name: record for name, record in _records(cache).items() if name != key}
    records[key] = {
        "name": identity.name,
        "dimension": identity.dimension,
        "file_hash": identity.file_hash,
        "files": files,
        "folder": str(folder.resolve()),
        "recipe": recipe.as_dict() if recipe else None,
    }
    _write(dict(list(records.items())[-_KEEP:]), cache or cache_root())


def _file_version(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _records(cache: Path | None) -> dict[str, Any]:  # json.loads of the identities file
    try:
        records = json.loads(((cache or cache_root()) / _FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _write(records: Mapping[str, object], cache: Path) -> None:
    """Replace the file whole (a reader sees the old one or the new one)."""
    with contextlib.suppress(OSError):  # a record to spare work: without it the identity is worked out again
        write_atomically(cache / _FILE_NAME, json.dumps(records).encode("utf-8"))
