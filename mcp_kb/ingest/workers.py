"""Parsing and chunking in worker processes, so that what one file may cost is a real bound and a sync uses
every core.

A worker is a fresh interpreter (never a fork: the threads of LanceDB and ONNX Runtime do not survive one)
that receives the sync's token counter and registered parsers once, then one file at a time, and answers
each with its chunks or the reason it has none. The limits hold whatever a parser does, inside a C call too:
- time: the parent kills a worker still busy `file_seconds` after it got the file (plus a grace, so that
  the parser's own check, which says the same, wins when it can);
- memory (Linux): a worker's address space is capped at what it maps idle plus `file_memory_mb`, so a file
  that needs more fails with MemoryError in the worker, or kills it;
- a worker that dies (a signal, a crash in a C parser, the cap) fails its file with the reason and is
  replaced at the next file: the sync goes on. A worker killed from outside (SIGKILL: the system's
  out-of-memory killer, an operator) does not blame its file: the next sync parses it again.
A worker whose parent died ends at its next read, or, stuck in a C call, by faulthandler's timer.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from ..errors import KBError, ParseError
from ..models.base import TokenCounter
from ..settings import ChunkingConfig, SyncEngineConfig, child_environment, megabytes
from . import parsers
from .chunking import Chunk, document_chunks
from .reading import Reading, reading_of
from .parsers.bounds import too_large, too_slow

_GRACE_SECONDS = 5.0  # after file_seconds, before the kill
# The child imports what its parent imports, from the same places (`-I`: nothing from its working folder).
_BOOTSTRAP = "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from mcp_kb.ingest.workers import serve; serve()"
_HEADER_BYTES = 8  # a frame is its length, then a pickle
_READ_PIECE = 1 << 20
# 20,000 chunks of at most 8,192 tokens: far less than this; a larger frame is a worker gone wrong.
_ANSWER_LIMIT = 1 << 30


@dataclass(frozen=True)
class Job:
    """One file to parse and chunk, with its KB's settings."""

    path: Path
    doc_id: str
    ocr: bool
    chunking: ChunkingConfig


@dataclass(frozen=True)
class Parsed:
    """A file's chunks and reading form, or the reason it has none."""

    chunks: list[Chunk] = field(default_factory=list)
    reading: Reading | None = None
    ocr_pages: int = 0
    error: str = ""
    retire: bool = False  # the worker ends after this answer (out of memory, or holding much more than idle)
    retry: bool = False  # the file is not to blame (its worker was killed from outside): parse it again next time
    peak_mb: int = 0  # the most memory the worker has held so far (resident, high-water mark; 0: unknown)


@dataclass(frozen=True)
class _Setup:
    counter: TokenCounter
    parsers: dict[str, tuple[Any, bool, bool]]
    seconds: float
    memory_mb: int


class ParseWorkers:
    """The worker processes of one sync (or check): `parse(jobs)` answers in the jobs' order, parsing `count`
    files at a time. A worker starts at its first file; all end with the block."""

    def __init__(self, settings: SyncEngineConfig, counter: TokenCounter, files: int):
        self.count = settings.worker_count(files)
        self._settings = settings
        # Loaded here first (it loads at its first use): a broken tokenizer fails the sync with its reason,
        # not each file in a worker.
        counter.count(["the tokenizer loads before the workers start"])
        self._setup = _pickled_setup(settings, counter)
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        for _ in range(self.count):
            self._idle.put(None)  # no process yet
        self._started: list[_Worker] = []
        self._closed = False
        self._lock = threading.Lock()
        self._threads = ThreadPoolExecutor(self.count, thread_name_prefix="mcp-kb-parse")

    def __enter__(self) -> ParseWorkers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def parse(self, jobs: list[Job]) -> list[Parsed]:
        return list(self._threads.map(self._parse_one, jobs))

    def _parse_one(self, job: Job) -> Parsed:
        worker = self._idle.get()
        if worker is not None and not worker.alive:  # killed while idle: nothing of a file was lost
            self._let_go(worker)
            worker = None
        worker = worker or self._start()
        try:
            return worker.run(job)
        finally:
            if worker.alive:
                self._idle.put(worker)
            else:
                self._let_go(worker)
                self._idle.put(None)  # a new worker takes its place at the next file

    def _let_go(self, worker: _Worker) -> None:
        """Close a dead worker's pipes now: a long sync may see many die."""
        worker.stop()
        with self._lock:
            if worker in self._started:
                self._started.remove(worker)

    def _start(self) -> _Worker:
        with self._lock:
            if self._closed:  # a file still queued when the sync was stopped
                raise KBError("the sync was stopped")
            worker = _Worker(self._setup, self._settings)
            self._started.append(worker)
            return worker

    def close(self) -> None:
        """End every worker (a file being parsed is abandoned) and wait for the threads talking to them."""
        with self._lock:
            self._closed = True
            for worker in self._started:
                worker.kill()
        self._threads.shutdown(wait=True, cancel_futures=True)
        for worker in self._started:
            worker.stop()


class _Worker:
    """One worker process, used by one thread at a time."""

    def __init__(self, setup: bytes, settings: SyncEngineConfig):
        self._seconds = settings.file_seconds
        self._memory_mb = settings.file_memory_mb
        self._out_of_time = False
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP, json.dumps(sys.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # glibc gives each thread an arena of 64 MB of address space,
            # which the cap would count as if used
            env=child_environment(MALLOC_ARENA_MAX="2"),
        )
        assert self._process.stdin is not None and self._process.stdout is not None  # both are pipes
        self._requests: IO[bytes] = self._process.stdin
        self._answers: IO[bytes] = self._process.stdout
        try:
            _write(self._requests, setup)
        except OSError:  # it died at once: its first file says how
            pass

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def run(self, job: Job) -> Parsed:
        self._out_of_time = False
        timer = threading.Timer(self._seconds + _GRACE_SECONDS, self._kill_for_time)
        timer.start()
        try:
            _write(self._requests, pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
            answer: Parsed = pickle.loads(_read(self._answers))
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            answer = self._ended(exc)
        finally:
            timer.cancel()
        if answer.retire:
            self.stop()
        return answer

    def _kill_for_time(self) -> None:
        self._out_of_time = True
        self.kill()

    def _ended(self, exc: Exception) -> Parsed:
        """The answer for a file whose worker ended, or sent what is no answer, before answering."""
        self.kill()
        code = self._process.wait()
        if self._out_of_time:
            return Parsed(error=too_slow(self._seconds))
        if isinstance(exc, pickle.UnpicklingError) or (isinstance(exc, EOFError) and exc.args):
            return Parsed(error=f"the parsing process sent an answer that cannot be read ({exc}); it was stopped")
        if code >= 0:  # it exited, or it is alive and said something that is no answer (then killed above)
            return Parsed(error=f"the parsing process ended on this file with exit status {code}")
        name = signal.Signals(-code).name  # a signal: POSIX only, where SIGKILL exists
        if name == "SIGKILL":  # not ours: the out-of-memory killer, or someone, chose this process
            return Parsed(
                error="the parsing process was killed (SIGKILL) while on this file; it is parsed again at "
                "the next sync",
                retry=True,
            )
        return Parsed(
            error=f"the parsing process ended on this file by {name} (a crash in a parser, or more than "
            f"{self._memory_mb} MB of memory)"
        )

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()

    def stop(self) -> None:
        """End the process and close its pipes (by the thread using it, or once no thread does)."""
        self.kill()
        self._process.wait()
        for pipe in (self._requests, self._answers):
            try:
                pipe.close()
            except OSError:  # a request still buffered for a process that is gone
                pass


def _pickled_setup(settings: SyncEngineConfig, counter: TokenCounter) -> bytes:
    setup = _Setup(counter, parsers.registered(), settings.file_seconds, settings.file_memory_mb)
    try:
        return pickle.dumps(setup, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise KBError(
            f"the token counter or a registered parser cannot be sent to the parsing processes ({exc}): "
            f"define it at the top level of a module"
        ) from exc


def _write(stream: IO[bytes], data: bytes) -> None:
    stream.write(len(data).to_bytes(_HEADER_BYTES, "big"))
    stream.write(data)
    stream.flush()


def _read(stream: IO[bytes], limit: int = _ANSWER_LIMIT) -> bytes:
    """One frame, read a piece at a time: a header that lies about its size costs what is really sent."""
    header = stream.read(_HEADER_BYTES)
    if len(header) < _HEADER_BYTES:
        raise EOFError
    size = int.from_bytes(header, "big")
    if size > limit:
        raise EOFError(f"a frame of {size:,} bytes, over the {limit:,} limit")
    data = bytearray()
    while len(data) < size:
        piece = stream.read(min(size - len(data), _READ_PIECE))
        if not piece:
            raise EOFError
        data += piece
    return bytes(data)


# ---- the worker's side ---------------------------------------------------------------------


def serve() -> None:
    """A worker's loop: the setup, then one file after another until its parent closes the pipe."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a parser prints goes to stderr, never into the answers
    requests = sys.stdin.buffer
    setup: _Setup = pickle.loads(_read(requests))
    for suffix, (parser, binary, ocr) in setup.parsers.items():
        parsers.register([suffix], parser, binary, ocr)
    setup.counter.count(["a warm-up, so that the tokenizer's threads", "exist before the memory is capped"])
    idle = _Idle(_status_kb("VmRSS") or 0, _status_kb("VmPeak") or 0)
    _cap_memory(setup.memory_mb)
    while True:
        try:
            job: Job = pickle.loads(_read(requests))
        except EOFError:
            return
        faulthandler.dump_traceback_later(2 * setup.seconds + _GRACE_SECONDS, exit=True)  # its parent is gone
        answer = replace(_parse(job, setup, idle), peak_mb=resident_peak_mb())
        faulthandler.cancel_dump_traceback_later()
        _write(answers, pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
        if answer.retire:
            return


@dataclass(frozen=True)
class _Idle:
    """What a worker holds before its first file, in kB."""

    resident: int
    mapped_peak: int


def _parse(job: Job, setup: _Setup, idle: _Idle) -> Parsed:
    half = megabytes(setup.memory_mb) // 1024 // 2  # in kB, as the process's status counts
    try:
        document = parsers.parse_file(job.path, job.doc_id, ocr=job.ocr, seconds=setup.seconds)
        chunks = document_chunks(document, job.chunking, setup.counter)
    except MemoryError:
        return Parsed(error=too_large(setup.memory_mb), retire=True)
    except ParseError as exc:
        # A C library refused memory at the cap in words of its own (lxml: "XMLSyntaxError: unknown
        # error"): a file that made the worker map over half its allowance failed for want of memory.
        if (_status_kb("VmPeak") or 0) - idle.mapped_peak > half:
            return Parsed(error=too_large(setup.memory_mb), retire=True)
        return Parsed(error=str(exc))
    # Memory a parser freed may stay with the process: a worker holding much more than idle starts anew.
    grown = (_status_kb("VmRSS") or 0) - idle.resident > half
    reading = reading_of(document, [chunk.offset for chunk in chunks], sum(chunk.n_tokens for chunk in chunks))
    return Parsed(chunks, reading, document.ocr_pages, retire=grown)


def _cap_memory(allowance_mb: int) -> None:
    """Cap this process's address space at what it maps now plus `allowance_mb` (Linux; elsewhere the cap is
    either not enforced or what is mapped cannot be read, and the kill timer is the only bound)."""
    mapped = _status_kb("VmSize")
    if mapped is None:
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped * 1024 + megabytes(allowance_mb)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def resident_peak_mb() -> int:
    """The most memory this process has held so far (resident high-water mark), in MB; 0 where unknown."""
    return (_status_kb("VmHWM") or 0) // 1024


def _status_kb(field_name: str) -> int | None:
    """A size from /proc/self/status, in kB (None where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field_name}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
