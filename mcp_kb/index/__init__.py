"""The index: the one schema, the store contract and its LanceDB backend, sync state, filter predicates
and keyword analysis.

The only package that imports lancedb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import StorageConfig
    from .contract import Store


def open_store(storage: StorageConfig) -> Store:
    """The store at the configured location (LanceDB is imported now, not with the package)."""
    from .store import LanceStore

    return LanceStore.of(storage)
