"""The library object the CLI and the MCP server share: config, models and store, loaded lazily."""

from __future__ import annotations

import threading
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Any

from .config import ChunkingConfig, Config, KBConfig
from .errors import KBError, ParseError
from .index.state import is_sync_running, read_progress, read_summary
from .index.store import Store
from .ingest.chunking import Chunk
from .ingest.parsers import parse_file
from .ingest.sources import resolve_document, scan_sources
from .models import create_embedder, create_reranker, load_token_counter
from .models.base import Embedder, TokenCounter
from .present import document_text
from .search import Searcher, SearchResult
from .sync import ProgressCallback, SyncReport, document_chunks, file_chunks, sync_all


class App:
    """Everything a command or a tool needs; heavy parts load on first use."""

    def __init__(self, config: Config, embedder: Embedder | None = None):
        self.config = config
        self._embedder = embedder
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = create_embedder(self.config.embedding)
            return self._embedder

    @cached_property
    def tokenizer(self) -> TokenCounter:
        return load_token_counter(self.config.embedding)

    @cached_property
    def store(self) -> Store:
        return Store(self.config.storage)

    @cached_property
    def searcher(self) -> Searcher:
        rerank = self.config.rerank
        return Searcher(self.store, self.embedder, self.tokenizer, create_reranker(rerank), rerank.candidates)

    def search(self, kb: str, query: str, **options: Any) -> SearchResult:
        """Search one KB; options: top_k, mode, filters, min_score, context."""
        kb_config = self.config.get_kb(kb)
        return self.searcher.search(kb_config, self.searcher.request(kb_config, query, **options))

    def sync(self, kb: str | None = None, full: bool = False, progress: ProgressCallback | None = None,
             wait: bool = True, allow_mass_delete: bool = False) -> list[SyncReport]:
        return sync_all(self.config, self.store, self.embedder, self.tokenizer, kb, full=full, progress=progress,
                        wait=wait, allow_mass_delete=allow_mass_delete)

    def document_text(self, kb: str, doc_id: str) -> str:
        """The extracted text of one document of a KB (the same membership rules as a sync)."""
        return document_text(resolve_document(self.config.get_kb(kb), doc_id))

    def chunks(self, file: Path) -> tuple[list[Chunk], tuple[str, ...]]:
        """The chunks a file yields with the first KB's chunking settings (or the defaults), and the
        parser's notes; the same parsing and chunking as a sync, and only the model's tokenizer."""
        settings = self.config.kb[0].chunking if self.config.kb else ChunkingConfig()
        document = parse_file(file, file.name)
        return document_chunks(document, settings, self.tokenizer), document.notes

    def check(self, kb: str | None = None) -> list[dict[str, Any]]:
        """Per KB, what a sync would index: files by type, chunks per file, skipped files with reasons."""
        return [self._kb_check(k) for k in self.config.select(kb)]

    def _kb_check(self, kb: KBConfig) -> dict[str, Any]:
        try:
            scan = scan_sources(kb)
        except KBError as exc:  # e.g. a path that does not exist: the other KBs are still checked
            return {"kb": kb.name, "tool": kb.search_tool_name, "error": str(exc)}
        kinds: Counter[str] = Counter()
        chunks_by_file: dict[str, int] = {}
        skipped = [{"path": s.doc_id, "reason": s.reason} for s in scan.skipped]
        for source in scan.files:
            try:
                chunks_by_file[source.doc_id] = len(file_chunks(source, kb, self.tokenizer))
                kinds[source.path.suffix.lower()] += 1
            except ParseError as exc:
                skipped.append({"path": source.doc_id, "reason": str(exc)})
        return {"kb": kb.name, "tool": kb.search_tool_name, "files": len(chunks_by_file), "by_type": dict(kinds),
                "chunks": sum(chunks_by_file.values()), "chunks_by_file": chunks_by_file, "skipped": skipped}

    def status(self, kb: str | None = None) -> list[dict[str, Any]]:
        """Per KB: files, chunks, last sync, model, index state, failed files."""
        return [self._kb_status(k.name) for k in self.config.select(kb)]

    def document_ids(self, kb: str) -> list[str]:
        """The ids (paths) of every document the KB's index holds."""
        return list(self.store.read_files(self.config.get_kb(kb).name))

    def summary(self, kb: str) -> dict[str, Any]:
        """What a KB holds (documents, their kinds, chunks) as of its last sync, read without LanceDB."""
        return read_summary(self.config.storage, kb)

    def _kb_status(self, name: str) -> dict[str, Any]:
        kb = self.config.get_kb(name)
        state = self.store.read_state(name)
        running = is_sync_running(self.config.storage)
        files = self.store.read_files(name)
        last = state.get("last_sync", {})
        return {
            "name": name,
            "description": kb.description,
            "tool": kb.search_tool_name,
            "files": sum(1 for r in files.values() if r.status == "indexed"),
            "chunks": self.store.count_chunks(name),
            "index_version": self.store.version(name),
            "generation": self.store.active_generation(name),
            "sync_running": running,
            "progress": read_progress(self.config.storage, name, running),  # files done / total of a running sync
            "last_sync": last.get("finished_at"),
            "last_outcome": last.get("outcome", "never synced"),
            "last_error": last.get("error", ""),
            "model": state.get("model"),
            "index_state": last.get("report", {}).get("index_state", ""),
            "failed": [{"path": p, "reason": r.reason} for p, r in files.items() if r.status == "failed"],
        }
