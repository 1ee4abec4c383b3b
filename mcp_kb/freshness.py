"""Freshness: whether what the index says of a document is still what its source holds.

Every answer (a search's hits, a read) says when its documents were indexed and, where a source has changed since,
says how in one line (`changed`; `stale`). Only the answer's own documents are looked at, and only cheaply, each
source for its own (ingest/sources.py `Source.changed`): a folder's file by a stat, a web page by its age, a
repository's file by where its ref was last seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .ingest.sources import Recorded, changed_documents, sources_of
from .settings import KBConfig

if TYPE_CHECKING:
    import pyarrow as pa


def recorded_in(listing: pa.Table, paths: Iterable[str]) -> dict[str, Recorded]:
    """What a KB's listing (index/readings.py) recorded of these documents, by path."""
    import pyarrow  # loaded already: the listing is Arrow's
    import pyarrow.compute as pc

    rows = listing.filter(pc.is_in(listing["path"], pyarrow.array(list(paths), pyarrow.string())))
    return {row["path"]: Recorded(row["size"], row["mtime_ns"], row["synced_at"])
            for row in rows.select(["path", "size", "mtime_ns", "synced_at"]).to_pylist()}


class Freshness:
    """Tells which documents of an answer changed since they were indexed."""

    def __init__(self, cache_folder: Callable[[str], Path]):
        """`cache_folder`: where a KB's sources keep what they download (a repository's copy), by the KB's name."""
        self._cache_folder = cache_folder

    def changed(self, kb: KBConfig, recorded: Mapping[str, Recorded],
                revisions: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """Of the documents `recorded` names, those whose source changed since the sync recorded them, each with one
        line saying how; `revisions` are what the KB's sources had read for its index (a repository's commit)."""
        return changed_documents(sources_of(kb, self._cache_folder(kb.name)), recorded, revisions)
