"""`[storage]`: where the index lives and how LanceDB reaches it."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from .variables import ENV_STORAGE, cache_root, default_storage, expand_environment, from_environment
from .values import REMOTE_READ_CONSISTENCY, PathText, Strict, is_remote_uri, megabytes


class StorageConfig(Strict):
    """Where the index lives and how LanceDB reaches it; `storage = "…"` is short for `[storage] uri = "…"`."""

    # a folder, or s3:// gs:// az:// (any LanceDB URI)
    uri: PathText = Field(default_factory=default_storage, json_schema_extra=from_environment(ENV_STORAGE))
    # Passed to LanceDB (endpoint, region, allow_http, credentials, ...); "${NAME}" in a value is read
    # from the environment. Credentials usually come from the store's own variables (AWS_ACCESS_KEY_ID, ...).
    options: dict[str, str] = Field(default_factory=dict)
    read_consistency: float | None = Field(None, ge=0, le=3600)  # seconds; unset: 0 for a folder, 5 for a URI
    lease_seconds: float = Field(60, ge=1, le=3600)  # a writer's lease on shared storage outlives a crash this long
    # Searches on s3:// storage keep the data and index pages they fetch in a disk cache of this many MB
    # (0: off); what says which version is current is always asked of the store (index/readcache/).
    read_cache_mb: int = Field(1024, ge=0, le=1_048_576)
    # LanceDB's in-memory caches of index pieces and table metadata, in MB (its own default: 7 GB). A server
    # on a million chunks held 1.19 GB after 200 hybrid searches with 2048 or 7168, 1.18 GB with 512 but
    # searched 2x slower (benchmarks/shared_index.py rss): the cache is not what holds the memory there.
    memory_cache_mb: int = Field(2048, ge=1, le=1_048_576)
    read_cache_dir: PathText | None = None  # default: "read-cache" in this user's cache folder

    @property
    def is_remote(self) -> bool:
        return is_remote_uri(self.uri)

    @property
    def consistency_seconds(self) -> float:
        """How soon a reader sees a new version: every read checks on a folder; a remote store is
        asked at most every few seconds (each check is a request)."""
        if self.read_consistency is not None:
            return self.read_consistency
        return REMOTE_READ_CONSISTENCY if self.is_remote else 0.0

    def read_cache(self) -> tuple[Path, int] | None:
        """(folder, bytes) of the readers' disk cache, or None when off."""
        if not self.is_remote or self.read_cache_mb == 0:
            return None
        folder = Path(self.read_cache_dir) if self.read_cache_dir else cache_root() / "read-cache"
        return folder, megabytes(self.read_cache_mb)

    def lancedb_options(self) -> dict[str, str]:
        return {key: expand_environment(value, f"storage.options.{key}") for key, value in self.options.items()}
