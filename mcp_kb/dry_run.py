"""What a sync would index, worked out without indexing anything: per KB, its files by type, chunks per file and
what it would skip and why (`mcp-kb check`); for one file, its chunks (`mcp-kb chunks`). Both parse and chunk as
a sync does, with only the model's tokenizer."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .batches import parse_job
from .errors import KBError
from .ingest.chunking import Chunk, document_chunks
from .ingest.parsers import parse_file
from .ingest.sources import SourceScan, scan_all, sources_of, why_no_documents
from .ingest.workers import ParseWorkers
from .models.base import TokenCounter
from .records import KBCheck, Problem
from .settings import ChunkingConfig, Config, KBConfig, SyncEngineConfig

# The tokenizer is asked for only once there is something to chunk: a KB whose sources cannot be listed, or a file
# that cannot be parsed, is said without loading (or downloading) it.
Tokenizer = Callable[[], TokenCounter]


def check_kb(limits: SyncEngineConfig, kb: KBConfig, tokenizer: Tokenizer) -> KBCheck:
    """What a sync of the KB would index, within a sync's limits; a KB whose sources cannot be scanned (e.g. a path
    that does not exist) is one with its error, so the other KBs are still checked."""
    with tempfile.TemporaryDirectory(prefix="mcp-kb-check-") as cache:  # a check leaves the sync's cache alone
        try:
            scan = scan_all(sources_of(kb, Path(cache)))
        except KBError as exc:
            return KBCheck(kb.name, kb.search_tool_name, error=str(exc))
        return _chunk_counts(limits, kb, scan, tokenizer)


def _chunk_counts(limits: SyncEngineConfig, kb: KBConfig, scan: SourceScan, tokenizer: Tokenizer) -> KBCheck:
    kinds: Counter[str] = Counter()
    chunks_by_file: dict[str, int] = {}
    skipped = [Problem(s.doc_id, s.reason) for s in scan.skipped]
    with ParseWorkers(limits, tokenizer(), len(scan.files)) as workers:
        outcomes = workers.parse([parse_job(source, kb) for source in scan.files])
    for source, outcome in zip(scan.files, outcomes):
        if outcome.error:
            skipped.append(Problem(source.doc_id, outcome.error))
        else:
            chunks_by_file[source.doc_id] = len(outcome.chunks)
            kinds[source.path.suffix.lower()] += 1
    return KBCheck(
        kb.name,
        kb.search_tool_name,
        files=len(chunks_by_file),
        by_type=dict(kinds),
        chunks=sum(chunks_by_file.values()),
        chunks_by_file=chunks_by_file,
        skipped=tuple(skipped),
        crawl=scan.figures,
        no_documents="" if scan.files else why_no_documents(kb, scan),
    )


def file_chunks(config: Config, file: Path, tokenizer: Tokenizer) -> tuple[list[Chunk], tuple[str, ...]]:
    """The chunks a file yields with the first KB's chunking settings (or the defaults), and the parser's notes."""
    settings = config.kb[0].chunking if config.kb else ChunkingConfig()
    document = parse_file(file, file.name, ocr=not config.kb or config.kb[0].ocr_on)
    return document_chunks(document, settings, tokenizer()), document.notes
