"""`[storage]`: where the index lives and how LanceDB reaches it."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from .variables import ENV_STORAGE, cache_root, default_storage, expand_environment, from_environment
from .values import REMOTE_READ_CONSISTENCY, PathText, Strict, is_remote_uri, megabytes


class StorageConfig(Strict):
    """Where the index lives and how LanceDB reaches it; `storage = "…"` is short for `[storage] uri = "…"`."""

    uri: PathText = Field(default_factory=default_storage, json_schema_extra=from_environment(ENV_STORAGE))
    """The index: a folder (default: the per-user data folder, `~/.local/share/mcp-kb/index` on Linux) or a LanceDB
    URI (`s3://bucket/kb`, `gs://…`, `az://…`) to share one index with a team. `storage = "…"` is short for it."""
    options: dict[str, str] = Field(default_factory=dict)
    """Passed to LanceDB: `aws_endpoint`, `aws_region`, `allow_http` (an S3-compatible server on plain HTTP),
    credentials, … (credentials also come from the store's own variables such as `AWS_ACCESS_KEY_ID`). `${NAME}` in
    a value is read from the environment, so secrets stay out of kb.toml; never shown in status or logs."""
    read_consistency: float | None = Field(None, ge=0, le=3600)
    """Seconds: how soon a reader sees a version another process committed (each check is a request to the store).
    Unset: 0 for a folder, 5 for a URI."""
    lease_seconds: float = Field(60, ge=1, le=3600)
    """On object storage, how long the writer lease of a crashed sync blocks the next one (renewed every third of
    it)."""
    # What says which version is current is always asked of the store (index/readcache/).
    read_cache_mb: int = Field(1024, ge=0, le=1_048_576)
    """On `s3://` storage, searches keep the data and index pages they fetch in a disk cache of this many MB (least
    recently used go first); 0 turns it off."""
    # A server on a million chunks held 1.19 GB after 200 hybrid searches with 2048 or 7168, 1.18 GB with 512 but
    # searched 2x slower (benchmarks/shared_index.py rss): the cache is not what holds the memory there.
    memory_cache_mb: int = Field(2048, ge=1, le=1_048_576)
    """MB for LanceDB's in-memory caches of index pieces (4/5) and table metadata (1/5), shared by a process's
    searches and syncs (LanceDB's own default allows 7 GB); less saves little memory and slows searches."""
    read_cache_dir: PathText | None = None
    """Where the read cache lives (default: `read-cache` in this user's cache folder); several servers on one
    machine can share it."""

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
