"""Freshness: whether what the index says of a document is still what its source holds.

Every answer (a search's hits, a read) says when its documents were indexed and, where a source has changed since,
says how in one line (`changed`; `stale`). Only the answer's own documents are looked at, and only cheaply, each
source for its own (ingest/sources.py `Source.changed`): a folder's file by a stat against the fingerprint the
manifest holds, a web page by when its site was last asked, a repository's file by where its ref was last seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .ingest.sources import Indexed, Recorded, changed_documents, sources_of
from .records import KBState
from .settings import KBConfig

if TYPE_CHECKING:
    import pyarrow as pa


def indexed_times(listing: pa.Table, paths: Iterable[str]) -> dict[str, str]:
    """When each of these documents was indexed (ISO 8601, UTC), from a KB's listing (index/readings.py)."""
    import pyarrow  # loaded already: the listing is Arrow's
    import pyarrow.compute as pc

    rows = listing.filter(pc.is_in(listing["path"], pyarrow.array(list(paths), pyarrow.string())))
    return {row["path"]: row["synced_at"] for row in rows.select(["path", "synced_at"]).to_pylist()}


class Freshness:
    """Tells which documents of an answer changed since they were indexed."""

    def __init__(self, cache_folder: Callable[[str], Path], asks_remotes: bool = False, owner: str = ""):
        """`cache_folder`: where a KB's sources keep what they download (a repository's copy), by the KB's name;
        `asks_remotes`: this process lives on (a server), so it may ask a repository in the background; `owner`:
        this config's kb.toml, when its KBs live in the default index (Config.owner)."""
        self._cache_folder = cache_folder
        self.asks_remotes = asks_remotes
        self.owner = owner

    def changed(self, kb: KBConfig, fingerprints: Mapping[str, tuple[int, int]], state: KBState) -> dict[str, str]:
        """Of the documents whose fingerprints (size, mtime_ns) the index's manifest holds, those whose source changed
        since, each with one line saying how; `state` is the KB's (what its sources read for the index, when it was
        last confirmed)."""
        if state.owned_by_another(self.owner):  # another project's documents: this config's sources are not theirs
            return {}
        recorded = {path: Recorded(*fingerprint) for path, fingerprint in fingerprints.items()}
        indexed = Indexed(state.revisions, state.confirmed_at, self.asks_remotes)
        return changed_documents(sources_of(kb, self._cache_folder(kb.name)), recorded, indexed)
