"""`[sync]`: how this machine runs a sync: the processes that parse and chunk files, and what one file may
cost them, or the Ray cluster that parses, chunks and embeds (per-KB triggers are `[kb.sync]`)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field

from .values import Strict
from .variables import ENV_RAY_ADDRESS, from_environment

FILE_SECONDS = 120.0  # parsing and chunking one file, by default
# A worker costs about 0.3 s of CPU to start, what parsing a few ordinary files costs: a small sync starts
# one worker for this many files to parse.
FILES_PER_WORKER = 8
FILE_MEMORY_MB = 2048  # address space one file may make a worker map beyond idle (OCR of a scan maps ~1 GB)
# Files a Ray sync commits at once: enough to keep a cluster's workers busy between two commits, few enough that a
# lost coordinator costs little work.
WAVE_FILES = 1024


class SyncEngineConfig(Strict):
    """How syncs run here: files are parsed and chunked in worker processes, each file within hard limits."""

    workers: int = Field(0, ge=0, le=256)
    """Processes that parse and chunk files side by side; 0: one per core this process may use. A sync starts at
    most one per 8 files to parse (starting one costs about 0.3 s of CPU)."""
    file_seconds: float = Field(FILE_SECONDS, gt=0, le=86_400)
    """Seconds parsing and chunking one file may take: past them its process is killed and that file fails alone,
    with the reason."""
    file_memory_mb: int = Field(FILE_MEMORY_MB, ge=64, le=1_048_576)
    """MB of address space a worker may map beyond what it holds idle (Linux): a file needing more fails alone,
    with the reason. OCR of a scan maps about 1 GB and holds about 600 MB."""
    engine: Literal["local", "ray"] = "local"
    """Where new and changed files are parsed, chunked and embedded: "local" (this machine's worker processes) or
    "ray" (the tasks and actors of a Ray cluster, which write the chunks straight to the index storage; needs
    `pip install 'mcp-kb-server[ray]'` here and on every node). `mcp-kb sync --engine` overrides it."""
    ray_address: str = Field("", json_schema_extra=from_environment(ENV_RAY_ADDRESS))
    """The Ray cluster of engine = "ray": `HOST:6379` (its head), `ray://HOST:10001`, or "auto" (the cluster `ray
    start` began on this machine); empty: a Ray of the sync's own on this machine. The `RAY_ADDRESS` variable and
    `mcp-kb sync --address` override it."""
    wave_files: int = Field(WAVE_FILES, ge=1, le=1_000_000)
    """Files a Ray sync makes searchable in one commit: the cluster parses and embeds a wave's files side by side,
    then one commit adds their chunks (a coordinator lost mid-wave loses that wave's work, nothing else)."""

    def overridden(self, engine: str | None, ray_address: str | None) -> SyncEngineConfig:
        """These settings with a command's choice of engine and cluster in place (a cluster named means Ray)."""
        chosen = {"engine": engine or ("ray" if ray_address else self.engine), "ray_address": ray_address}
        return self.model_validate({**self.model_dump(), **{k: v for k, v in chosen.items() if v is not None}})

    def worker_count(self, files: int) -> int:
        """How many workers parse `files` files: `workers`, but one per FILES_PER_WORKER files at most."""
        wanted = self.workers or usable_cores()
        return max(1, min(wanted, -(-files // FILES_PER_WORKER)))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
