"""Parsing in worker processes: files that hang, crash or hold too much fail alone with their reason, the
limits hold inside a parser's own code, and several files are parsed at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import process_running, until, write

import hostile_parsers
from mcp_kb.errors import KBError
from mcp_kb.ingest import parsers
from mcp_kb.ingest.parsers.bounds import MAX_CHUNKS
from mcp_kb.api import SearchRequest
from helpers import MakeApp
from helpers import MakeConfig
from mcp_kb.models.fastembed import FastEmbedder

GOOD_FILES = 10  # with two hostile ones, enough files for two workers (FILES_PER_WORKER)
# The memory cap and the process table are read from /proc.
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="worker limits are Linux's (/proc)")


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the hostile parsers as a plugin would; the registrations end with the test."""
    monkeypatch.setattr(parsers, "_PARSERS", dict(parsers._PARSERS))
    monkeypatch.setattr(parsers, "_BINARY", set(parsers._BINARY))
    monkeypatch.setattr(parsers, "_OCR", set(parsers._OCR))
    for name in ("hang", "hang_once", "crash", "hog", "meet"):
        parsers.register([f".{name}"], getattr(hostile_parsers, name))


def _folder(tmp_path: Path, *hostile: str) -> Path:
    docs = tmp_path / "docs"
    (tmp_path / "markers").mkdir()
    for i in range(GOOD_FILES):
        write(docs / f"note{i}.md", f"# Note {i}\n\nThe rollout of feature {i} needs two approvals.\n")
    for name in hostile:
        write(docs / name, "text a parser is given\n")
    return docs


def test_files_that_hang_crash_or_need_too_much_memory_fail_alone_and_the_rest_is_indexed(
    registered: None, make_app: MakeApp, tmp_path: Path
) -> None:
    docs = _folder(tmp_path, "stuck.hang", "broken.crash", "greedy.hog")
    app = make_app(
        {"name": "docs", "description": "d", "paths": [str(docs)]},
        sync={"workers": 2, "file_seconds": 1, "file_memory_mb": 256},
    )
    report = app.sync()[0]
    reasons = {f.path: f.reason for f in report.failures}
    assert reasons["stuck.hang"].startswith("parsing took longer than 1 s, the limit per file")
    assert reasons["broken.crash"].startswith("the parsing process ended on this file by SIGSEGV")
    assert reasons["greedy.hog"].startswith("parsing needed more than 256 MB of memory, the limit per file")
    assert report.files_failed == 3 and report.files_added == GOOD_FILES
    assert app.search("docs", SearchRequest(query="rollout of feature 4", top_k=1)).hits[0].source == "note4.md"


def test_a_worker_killed_from_outside_does_not_blame_its_file_and_the_next_sync_indexes_it(
    registered: None, make_app: MakeApp, tmp_path: Path
) -> None:
    docs = _folder(tmp_path, "victim.hang_once")
    app = make_app({"name": "docs", "description": "d", "paths": [str(docs)]}, sync={"workers": 1})
    reports = []
    sync = threading.Thread(target=lambda: reports.extend(app.sync()))
    sync.start()
    marker = tmp_path / "markers" / "victim.hang_once.pid"
    os.kill(
        int(until(lambda: marker.is_file() and marker.read_text(), what="the worker reaching the file")), signal.SIGKILL
    )  # as the out-of-memory killer would
    sync.join()
    assert {f.path: f.reason for f in reports[0].failures} == {
        "victim.hang_once": "the parsing process was killed (SIGKILL) while on this file; it is parsed again at the "
        "next sync"
    }
    assert reports[0].chunks_total == GOOD_FILES and not app.status("docs")[0].failed
    again = app.sync()[0]
    assert (again.files_added, again.files_failed, again.chunks_total) == (1, 0, GOOD_FILES + 1)
    assert app.chunk_text("docs", "victim.hang_once", 0) == "text a parser is given"


def test_files_are_parsed_side_by_side_in_as_many_processes_as_workers(
    registered: None, make_app: MakeApp, tmp_path: Path
) -> None:
    docs = _folder(tmp_path, "a.meet", "b.meet")
    app = make_app({"name": "docs", "description": "d", "paths": [str(docs)]}, sync={"workers": 2})
    app.sync()
    texts = {name: app.chunk_text("docs", name, 0) for name in ("a.meet", "b.meet")}
    assert texts == {"a.meet": "a met the others: True", "b.meet": "b met the others: True"}
    pids = {(tmp_path / "markers" / f"{name}.pid").read_text() for name in ("a.meet", "b.meet")}
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_a_file_making_more_chunks_than_one_file_may_fails_with_the_count(make_app: MakeApp, tmp_path: Path) -> None:
    records = [{"question": f"question {i}", "answer": f"answer {i}"} for i in range(MAX_CHUNKS + 1)]
    write(tmp_path / "docs" / "faq.jsonl", "\n".join(json.dumps(record) for record in records))
    write(tmp_path / "docs" / "small.md", "# Small\n\nA small note about parking.\n")
    report = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}).sync()[0]
    assert {f.path: f.reason for f in report.failures} == {
        "faq.jsonl": f"makes {MAX_CHUNKS + 1:,} chunks, over the {MAX_CHUNKS:,} limit per file; split the file (or "
        f"raise [kb.chunking] max_tokens) to index it"
    }
    assert report.chunks_total == 1


def test_a_parser_that_cannot_be_sent_to_a_worker_is_named_before_anything_is_parsed(
    registered: None, make_app: MakeApp, tmp_path: Path
) -> None:
    parsers.register([".local"], lambda path, doc_id: None)  # type: ignore[arg-type,return-value]  # never parses: it only has to be refused
    write(tmp_path / "docs" / "a.md", "# A\n\ntext\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    with pytest.raises(
        KBError,
        match="a registered parser cannot be sent to the parsing processes .*define it at the top level of a module",
    ):
        app.sync()


_SYNC = """
import sys
from mcp_kb.ingest import parsers
import hostile_parsers
parsers.register([".hang"], hostile_parsers.hang)
sys.argv = ["mcp-kb", "sync", "-c", sys.argv[1]]
from mcp_kb.cli import main
main()
"""


def test_a_sync_killed_while_a_worker_is_stuck_leaves_no_worker_behind_and_the_next_sync_completes(
    registered: None, tmp_path: Path
) -> None:
    docs = _folder(tmp_path, "stuck.hang")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[sync]\nworkers = 1\nfile_seconds = 1\n'
        f'[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    tests = str(Path(hostile_parsers.__file__).parent)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    sync = subprocess.Popen(
        [sys.executable, "-c", _SYNC, str(config)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marker = tmp_path / "markers" / "stuck.hang.pid"
    worker = int(until(lambda: marker.is_file() and marker.read_text(), what="the worker reaching the file"))
    sync.send_signal(signal.SIGKILL)
    sync.wait()
    until(lambda: not process_running(worker), seconds=30, what="the orphaned worker ending")
    marker.unlink()
    finished = subprocess.run(
        [sys.executable, "-c", _SYNC, str(config)], env=environment, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 3, finished.stderr  # 3: a file failed (the stuck one)
    assert f"docs: {GOOD_FILES} added, 0 changed, 0 deleted, 0 unchanged, 1 failed" in finished.stdout
    assert "failed stuck.hang: parsing took longer than 1 s" in finished.stdout


def test_a_frame_that_lies_about_its_size_costs_only_what_is_sent() -> None:
    import io

    from mcp_kb.ingest.workers import _read

    with pytest.raises(EOFError, match="over the"):
        _read(io.BytesIO((1 << 40).to_bytes(8, "big") + b"tiny"))  # refused before a byte is held
    with pytest.raises(EOFError):
        _read(io.BytesIO((1 << 29).to_bytes(8, "big") + b"tiny"))  # within the limit, but it ends: no 512 MB held
    assert _read(io.BytesIO((4).to_bytes(8, "big") + b"tiny")) == b"tiny"


def test_a_broken_tokenizer_fails_the_sync_with_its_reason_not_each_file_in_a_worker(
    make_config: MakeConfig, embedder: FastEmbedder, tmp_path: Path, model_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.app import App
    from mcp_kb.errors import ModelError

    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "tokenizer_config.json").write_bytes((model_folder / "tokenizer_config.json").read_bytes())
    (broken / "tokenizer.json").write_text('{"truncated": ')
    monkeypatch.delenv("MCP_KB_EMBEDDING_MODEL_PATH", raising=False)
    docs = _folder(tmp_path)
    config = make_config(
        {"name": "docs", "description": "d", "paths": [str(docs)]},
        embedding={"model": embedder.identity.name, "model_path": str(broken)},
    )
    app = App(config, embedder=embedder)  # the real model embeds; the tokenizer that measures chunks is broken
    with pytest.raises(ModelError, match=f"cannot read the tokenizer in {broken}"):
        app.sync()
    assert app.status("docs")[0].last_error.startswith(
        "cannot read the tokenizer in <model folder>"
    )  # for every caller
