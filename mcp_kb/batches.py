"""A batch of parsed files made into chunk rows and manifest records: each chunk's vector reused from the index
when its content has one, else embedded. A local sync writes a batch in one commit (sync.py); a cluster's indexers
write batches as fragments that their coordinator commits a wave at a time (ray_engine.py)."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .digest import short_key
from .errors import KBError
from .index.contract import FileRecord, Store
from .index.keywords import keyword_terms
from .ingest.chunking import Chunk
from .ingest.reading import Reading, line_count, outline_json
from .ingest.sources import SourceFile
from .ingest.workers import Job, Parsed
from .lru import BoundedLRU
from .models.base import Embedder, TokenCounter
from .records import Problem, Progress, SyncReport, recorded_now
from .schema import ChunkRow, ReadingRow, coerce
from .settings import KBConfig
from .slices import sliced
from .stopwatch import stopwatch
from .vocabulary import files_indexed

log = logging.getLogger(__name__)

BATCH_FILES = 32  # files per commit: small enough to lose little to a crash, large enough to amortize commits
COMMIT_SECONDS = 10.0  # a batch's embedding that takes longer is committed in pieces: an interruption loses less
_EMBED_SLICE = 128  # chunks embedded between two progress reports (a batch of large files holds thousands)

# How far a batch's embedding is: (chunks embedded, chunks to embed).
EmbeddingProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class BatchContext:
    """What a KB sync's batches are embedded and written with: the store, the generation written (`target`), the
    one whose vectors may be reused (`reuse_from`: the generation a rebuild replaces, when its model is the same),
    the model, and the report and timer that add up what they did and cost. A cluster's indexer has its own."""

    store: Store
    kb: KBConfig
    target: str
    reuse_from: str | None
    embedder: Embedder
    report: SyncReport
    timer: Timer


@dataclass(frozen=True)
class SyncContext(BatchContext):
    """One KB's sync as it indexes its new and changed files, built once it knows the generation it writes: the
    batches' context, the tokenizer that chunks them, and who hears how far it is."""

    counter: TokenCounter
    progress: Progress

    def indexed(self, done: int, total: int, doing: str = "") -> None:
        """Progress: `done` of `total` files indexed, and what the sync is `doing` meanwhile."""
        self.progress(done, total, f"{self.kb.name}: {files_indexed(done, total)}" + (f" ({doing})" if doing else ""))


@dataclass
class ParsedFile:
    source: SourceFile
    file_hash: str
    chunks: list[Chunk]
    reading: Reading | None = None
    error: str = ""
    ocr_pages: int = 0
    retry: bool = False  # not to blame for its error: nothing of it is written, so the next sync parses it again


def parse_job(source: SourceFile, kb: KBConfig) -> Job:
    """What a worker needs to parse and chunk one file of a KB as a sync does."""
    return Job(source.ready(), source.doc_id, kb.ocr_on, kb.chunking)


def parsed_files(sources: Sequence[tuple[SourceFile, str]], outcomes: Sequence[Parsed]) -> list[ParsedFile]:
    """Each file (with its content hash) and what its parsing process made of it."""
    return [
        ParsedFile(source, file_hash, outcome.chunks, outcome.reading, outcome.error, outcome.ocr_pages, outcome.retry)
        for (source, file_hash), outcome in zip(sources, outcomes)
    ]


def parsing_peak_mb(outcomes: Sequence[Parsed], known: int = 0) -> int:
    """The most memory a parsing process held for these files, or `known` when that was more."""
    return max([known, *(outcome.peak_mb for outcome in outcomes)])


def embedded_rows(
    context: BatchContext,
    parsed: list[ParsedFile],
    embedding: EmbeddingProgress,
    recent: BoundedLRU[str, Any] | None = None,
) -> dict[str, list[dict[str, object]]]:
    """The chunk rows of a parsed batch by path, each with its vector (reused, or embedded here); a file whose
    parse is to be retried has none (it keeps what the index has of it). Raises ModelError."""
    return {
        path: rows for _, piece in embedded_pieces(context, parsed, embedding, recent) for path, rows in piece.items()
    }


def embedded_pieces(
    context: BatchContext,
    parsed: list[ParsedFile],
    embedding: EmbeddingProgress,
    recent: BoundedLRU[str, Any] | None = None,
    every: float = math.inf,
) -> Iterator[tuple[list[ParsedFile], dict[str, list[dict[str, object]]]]]:
    """The batch's rows as embedded_rows makes them, in pieces: the files whose chunks all have their vectors,
    each time `every` seconds of embedding have passed since the last piece, and the rest at the end. A sync
    commits each piece, so an interruption loses about `every` seconds of embedding (or one file's, when one file
    takes longer). Raises ModelError, after the pieces already given."""
    kb, report, timer = context.kb, context.report, context.timer
    chunks = [chunk for item in parsed for chunk in item.chunks]
    wanted = {chunk.content_hash: chunk for chunk in chunks}
    with timer("embed"):
        vectors = _stored_vectors(context, list(wanted), recent)
    missing = [content_hash for content_hash in wanted if content_hash not in vectors]
    report.chunks_reused += len(chunks) - len(missing)
    waiting, since, done = list(parsed), time.monotonic(), 0
    for hashes in sliced(missing, _EMBED_SLICE):
        with timer("embed"):
            vectors.update(zip(hashes, context.embedder.embed_batch([wanted[h].embed_text for h in hashes])))
        if recent is not None:
            for content_hash in hashes:
                recent.put(content_hash, vectors[content_hash])
        report.chunks_embedded += len(hashes)
        report.tokens_embedded += sum(wanted[h].n_tokens for h in hashes)
        done += len(hashes)
        embedding(done, len(missing))
        if time.monotonic() - since >= every and (whole := _leading_whole(waiting, vectors)):
            yield whole, _rows(kb, whole, vectors)
            waiting, since = waiting[len(whole) :], time.monotonic()
    if waiting:
        yield waiting, _rows(kb, waiting, vectors)


def _leading_whole(files: list[ParsedFile], vectors: dict[str, object]) -> list[ParsedFile]:
    """The files at the head of `files` whose every chunk has its vector."""
    return list(itertools.takewhile(lambda item: all(c.content_hash in vectors for c in item.chunks), files))


def _rows(kb: KBConfig, files: list[ParsedFile], vectors: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    metadata_types = kb.metadata_types()
    return {
        item.source.doc_id: [
            _chunk_row(kb, metadata_types, item.file_hash, chunk, vectors[chunk.content_hash]) for chunk in item.chunks
        ]
        for item in files
        if not item.retry
    }


def not_indexed(kb: KBConfig, parsed: list[ParsedFile], reason: KBError, report: SyncReport) -> None:
    """Nothing of this batch is written: its files keep what the index had, and having no new record they count
    as new or changed again, so the next sync retries them. A rebuild switches only when whole: it stops here,
    and the next sync resumes it."""
    if report.rebuilt:
        raise reason
    report.failures += [
        Problem(item.source.doc_id, item.error or f"not indexed, retried on the next sync: {reason}") for item in parsed
    ]
    log.warning("%s: %d files not indexed: %s", kb.name, len(parsed), reason)


def refuse(parsed: list[ParsedFile], refused: dict[str, str]) -> None:
    """A document whose values did not fit its columns (`refused`: the reason by path) fails alone."""
    for item in parsed:
        if item.source.doc_id in refused:
            item.error, item.chunks = refused[item.source.doc_id], []


def write_readings(store: Store, kb: str, target: str, parsed: list[ParsedFile]) -> None:
    """The reading forms of a written batch, after its chunks: a failed file loses its old one with its chunks (a
    file whose parse is to be retried keeps what it has)."""
    written = [item for item in parsed if not item.retry]
    store.write_readings(
        kb,
        target,
        [item.source.doc_id for item in written],
        [_reading_row(item, item.reading) for item in written if item.reading and not item.error],
    )


def _reading_row(item: ParsedFile, reading: Reading) -> ReadingRow:
    return ReadingRow(
        path=item.source.doc_id,
        title=reading.title,
        kind=reading.kind,
        size=item.source.size,
        mtime_ns=item.source.mtime_ns,
        file_hash=item.file_hash,
        synced_at=recorded_now(),
        pages=reading.pages,
        lines=line_count(reading.text),
        tokens=reading.tokens,
        chunks=len(item.chunks),
        text=reading.text,
        outline=outline_json(reading.sections),
        page_numbers=[page for page, _ in reading.page_starts],
        page_starts=[start for _, start in reading.page_starts],
        chunk_starts=list(reading.chunk_starts),
        as_written=reading.as_written,
    )


def written_records(parsed: list[ParsedFile]) -> list[FileRecord]:
    """The manifest records of a written batch (a file whose parse is to be retried keeps the one it has)."""
    return [_file_record(item) for item in parsed if not item.retry]


def count_batch(kb: KBConfig, parsed: list[ParsedFile], report: SyncReport) -> None:
    """A written batch's OCR pages and failed files, into the report."""
    report.pages_ocr += sum(item.ocr_pages for item in parsed)
    for item in parsed:
        if item.error:
            report.failures.append(Problem(item.source.doc_id, item.error))
            log.info("%s: failed %s: %s", kb.name, item.source.doc_id, item.error)  # the summary lists it


def _stored_vectors(context: BatchContext, wanted: list[str], recent: BoundedLRU[str, Any] | None) -> dict[str, object]:
    """The vectors these content hashes already have: in the target generation, in the one being replaced, and in
    `recent` (this sync's vectors not committed yet)."""
    store, kb = context.store, context.kb.name
    vectors: dict[str, object] = dict(store.vectors_by_content_hash(kb, context.target, wanted))
    if context.reuse_from is not None:
        unknown = [h for h in wanted if h not in vectors]
        vectors.update(store.vectors_by_content_hash(kb, context.reuse_from, unknown))
    if recent is not None:
        vectors.update((h, vector) for h in wanted if h not in vectors and (vector := recent.get(h)) is not None)
    return vectors


def chunk_id(kb: str, chunk: Chunk) -> str:
    """Stable id: the same KB, path, position and content give the same id."""
    key = f"{kb}\x00{chunk.doc_id}\x00{chunk.chunk_index}\x00{chunk.content_hash}"
    return short_key(key, 32)


def _chunk_row(
    kb: KBConfig, metadata_types: dict[str, str], file_hash: str, chunk: Chunk, vector: Any
) -> dict[str, object]:
    row = ChunkRow(
        id=chunk_id(kb.name, chunk),
        path=chunk.doc_id,
        chunk_index=chunk.chunk_index,
        heading=chunk.heading,
        title=chunk.title,
        page=chunk.page,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        text=chunk.text,
        search_text=keyword_terms(f"{chunk.title}\n{chunk.embed_text}"),
        field_text=keyword_terms("\n".join(dict.fromkeys(part for part in (chunk.title, *chunk.heading_path) if part))),
        content_hash=chunk.content_hash,
        file_hash=file_hash,
        n_tokens=chunk.n_tokens,
        parts=chunk.parts_json,
        vector=vector,
    ).as_dict()
    for name, kind in metadata_types.items():
        row[name] = coerce(chunk.metadata.get(name, kb.metadata.get(name)), kind)
    return row


def _file_record(item: ParsedFile) -> FileRecord:
    status = "failed" if item.error else "indexed"
    return FileRecord(
        item.source.doc_id, item.file_hash, item.source.size, item.source.mtime_ns, len(item.chunks), status, item.error
    )


class Timer:
    """Adds up seconds per stage into the report."""

    def __init__(self, report: SyncReport):
        self.report = report

    def add(self, stage: str, seconds: float) -> None:
        self.report.seconds[stage] = round(self.report.seconds.get(stage, 0.0) + seconds, 3)

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        with stopwatch(lambda seconds: self.add(stage, seconds)):
            yield
