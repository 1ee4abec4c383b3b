import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

import pytest
from helpers import chunk_table, write
from pdfs import text_pdf

from mcp_kb.app import App
from mcp_kb.digest import file_sha256
from mcp_kb.errors import KBError, ModelError, SyncBusyError
from mcp_kb.index.store import LanceStore
from mcp_kb.models.base import Embedder
from mcp_kb.records import Problem
from mcp_kb.vocabulary import SYNC_WORK_KEPT
from mcp_kb.index.state import sync_lock
from mcp_kb.sync import plan_sync
from mcp_kb.api import SearchRequest, SyncRequest
from mcp_kb.present import cited_text
from mcp_kb.requests import RollbackRequest, TagRequest
from helpers import MakeApp
from helpers import MakeConfig
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.settings import FastembedSettings

SECTIONS = 6


def _long_markdown(edited: int | None = None) -> str:
    parts = ["# Handbook"]
    for i in range(SECTIONS):
        body = (
            f"Section {i} describes procedure number {i} for the operations team. It lists the steps, "
            f"the owners and the checks to run before and after the change window. "
        ) * 3
        if i == edited:
            body = body.replace("the owners", "the named owners and their deputies")
        parts.append(f"## Part {i}\n\n{body}")
    return "\n\n".join(parts) + "\n"


T = TypeVar("T")


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(folder / "handbook.md", _long_markdown())
    write(folder / "faq.md", "# FAQ\n\n## Reset password\n\nUse the self-service portal to reset a password.\n")
    write(folder / "notes.txt", "Plain notes about the release train and its calendar.")
    return folder


@pytest.fixture
def app(make_app: MakeApp, kb_dir: Path) -> App:
    return make_app({"name": "docs", "description": "d", "paths": [str(kb_dir)]})


def _embedded_during(embedder: Embedder, work: Callable[[], T]) -> tuple[int, T]:
    before = embedder.calls
    result = work()
    return embedder.calls - before, result


def _rows(app: App, kb: str = "docs") -> list[tuple[str, str, str, tuple[float, ...]]]:
    table = chunk_table(app.store, kb)
    return sorted(
        (r["id"], r["path"], r["text"], tuple(round(v, 5) for v in r["vector"])) for r in table.to_arrow().to_pylist()
    )


def test_a_sync_without_its_model_is_recorded_as_failed_with_the_reason(
    make_config: MakeConfig, kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.app import App
    from mcp_kb.errors import ModelError

    monkeypatch.delenv("MCP_KB_EMBEDDING_MODEL_PATH", raising=False)  # it would override the folder below
    (tmp_path / "empty-model").mkdir()
    app = App(
        make_config(
            {"name": "docs", "description": "d", "paths": [str(kb_dir)]},
            embedding={"model_path": str(tmp_path / "empty-model")},
        )
    )
    with pytest.raises(ModelError) as error:
        app.sync()
    status = app.status("docs")[0]
    # every caller who sees the KB reads the record: the model's folder is named by what it is, as the index is
    assert status.last_outcome == "failed" and str(tmp_path / "empty-model") in str(error.value)
    assert status.last_error == str(error.value).replace(str(tmp_path / "empty-model"), "<model folder>")


def test_an_interrupted_sync_is_recorded_with_what_it_wrote_and_the_next_one_finishes_it(
    make_app: MakeApp, tmp_path: Path
) -> None:
    for number in range(40):  # two batches: 32 files a commit
        write(tmp_path / "notes" / f"n{number:02d}.md", f"# Note {number}\n\nThe meeting moved to room {number}.\n")
    app = make_app({"name": "notes", "description": "Notes", "paths": [str(tmp_path / "notes")]})

    def ctrl_c_after_the_first_batch(done: int, total: int, message: str) -> None:
        if message.endswith(f"{done} of {total} files indexed") and done == 32:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        app.sync(SyncRequest(kb="notes"), progress=ctrl_c_after_the_first_batch)
    [status] = app.status("notes")
    assert status.last_outcome == "interrupted" and status.files == 32
    assert status.last_error == f"interrupted after writing 32 of 40 new and changed files; {SYNC_WORK_KEPT}"
    [recent] = app.sync_history("notes").recent
    assert recent.outcome == "interrupted" and recent.error == status.last_error
    # searches read the 32 files kept: a version says so ("no versions recorded yet" did), and the next counts on
    [kept] = app.versions("notes")
    assert (kept.number, kept.kind, kept.added, kept.changed, kept.removed) == (1, "unfinished", 32, 0, 0)
    write(tmp_path / "notes" / "n00.md", "# Note 0\n\nThe meeting moved to the garden.\n")
    [report] = app.sync(SyncRequest(kb="notes"))
    assert report.files_added == 8 and report.files_changed == 1 and report.files_written == 9
    assert app.status("notes")[0].last_outcome == "ok"
    finished = app.versions("notes")[-1]
    assert (finished.number, finished.kind, finished.added, finished.changed) == (2, "sync", 8, 1)
    assert sum(version.added for version in app.versions("notes")) == app.status("notes")[0].files == 40


def test_a_batch_that_embeds_for_long_is_committed_as_it_goes_so_ctrl_c_keeps_what_was_embedded(
    make_app: MakeApp, tmp_path: Path, embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first sync of big files spends minutes in one batch of 32: a Ctrl-C used to keep none of it. Embedding
    commits the files it finished each COMMIT_SECONDS (0 here: after every slice of 4 chunks)."""
    import mcp_kb.batches
    import mcp_kb.sync

    for number in range(40):
        write(tmp_path / "notes" / f"n{number:02d}.md", f"# Note {number}\n\nThe meeting moved to room {number}.\n")
    app = make_app({"name": "notes", "description": "Notes", "paths": [str(tmp_path / "notes")]})
    monkeypatch.setattr(mcp_kb.sync, "COMMIT_SECONDS", 0.0)
    monkeypatch.setattr(mcp_kb.batches, "_EMBED_SLICE", 4)
    embed_batch = embedder.embed_batch

    def ctrl_c_at_note_21(texts: list[str]) -> np.ndarray:
        if any("Note 21" in text for text in texts):
            raise KeyboardInterrupt
        return embed_batch(texts)

    monkeypatch.setattr(embedder, "embed_batch", ctrl_c_at_note_21)
    with pytest.raises(KeyboardInterrupt):
        app.sync(SyncRequest(kb="notes"))
    [status] = app.status("notes")
    assert status.last_outcome == "interrupted" and status.files == 20  # five slices of four notes, each whole
    assert status.last_error.startswith("interrupted after writing 20 of 40 new and changed files")
    found = app.search("notes", SearchRequest(query="meeting moved to room 17", mode="keyword"))
    assert found.hits[0].source == "n17.md"
    monkeypatch.setattr(embedder, "embed_batch", embed_batch)
    [report] = app.sync(SyncRequest(kb="notes"))
    assert report.files_added == 20 and report.files_unchanged == 20 and app.status("notes")[0].files == 40


def test_progress_moves_while_a_batch_embeds(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_kb.batches

    monkeypatch.setattr(mcp_kb.batches, "_EMBED_SLICE", 2)
    reports = []
    app.sync(progress=lambda done, total, message: reports.append((done, total, message)))
    embedding = [message for _, _, message in reports if "(embedding" in message]
    assert len(embedding) >= 3 and embedding[0].endswith("(embedding 2/" + embedding[0].split("/")[-1])
    assert [done for done, _, _ in reports] == sorted(done for done, _, _ in reports)  # never goes back
    assert reports[-1][:2] == (3, 3)


@pytest.mark.parametrize("releases", [True, False], ids=["sync command", "server"])
def test_a_sync_command_lets_the_model_go_before_building_indexes(
    make_config: MakeConfig,
    kb_dir: Path,
    embedding_config: FastembedSettings,
    monkeypatch: pytest.MonkeyPatch,
    releases: bool,
) -> None:
    """The index builds are a sync's memory peak; a one-off sync needs no model for them, a server's next search
    does."""
    from mcp_kb.app import App
    from mcp_kb.index.store import LanceStore
    from mcp_kb.models.fastembed import FastEmbedder

    model = FastEmbedder(embedding_config)
    app = App(make_config({"name": "docs", "description": "d", "paths": [str(kb_dir)]}), embedder=model)
    app.releases_model = releases
    loaded_while_indexing = []
    refresh = LanceStore.refresh_indexes

    def recording(self: LanceStore, *args: Any) -> Any:
        loaded_while_indexing.append(model._model is not None)
        return refresh(self, *args)

    monkeypatch.setattr(LanceStore, "refresh_indexes", recording)
    assert app.sync()[0].chunks_embedded > 0
    assert loaded_while_indexing == [not releases]
    assert (
        app.search("docs", SearchRequest(query="reset a password")).hits[0].source == "faq.md"
    )  # a released model loads again


def test_plan_sync_is_a_pure_comparison() -> None:
    plan = plan_sync({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "x", "d": "4"})
    assert (plan.added, plan.changed, plan.deleted, plan.unchanged) == (["c"], ["b"], ["d"], ["a"])


def test_first_load_embeds_every_chunk(app: App, embedder: FastEmbedder) -> None:
    embedded, reports = _embedded_during(embedder, app.sync)
    report = reports[0]
    assert report.files_added == 3 and report.files_failed == 0
    assert embedded == report.chunks_embedded == report.chunks_total == app.store.count_chunks("docs")
    assert report.chunks_total >= SECTIONS


def test_full_reuses_the_vectors_of_an_unchanged_model_and_reembed_embeds_again(
    app: App, embedder: FastEmbedder
) -> None:
    app.sync()
    embedded, [full] = _embedded_during(embedder, lambda: app.sync(SyncRequest(full=True)))
    assert full.rebuilt == "--full requested" and embedded == full.chunks_embedded == 0
    assert full.chunks_reused == full.chunks_total > 0
    embedded, [again] = _embedded_during(embedder, lambda: app.sync(SyncRequest(reembed=True)))
    assert again.rebuilt == "--reembed requested" and embedded == again.chunks_embedded == again.chunks_total


def test_resync_without_changes_embeds_nothing(app: App, embedder: FastEmbedder) -> None:
    app.sync()
    embedded, reports = _embedded_during(embedder, app.sync)
    assert embedded == 0 and reports[0].files_unchanged == 3 and reports[0].files_changed == 0


def test_touched_but_unchanged_file_is_not_reembedded(app: App, embedder: FastEmbedder, kb_dir: Path) -> None:
    app.sync()
    future = time.time() + 100
    os.utime(kb_dir / "handbook.md", (future, future))
    embedded, reports = _embedded_during(embedder, app.sync)
    assert embedded == 0 and reports[0].files_unchanged == 3
    # The new mtime is recorded, so the next sync takes the fast path again.
    assert app.store.read_files("docs")["handbook.md"].mtime_ns == (kb_dir / "handbook.md").stat().st_mtime_ns


def test_editing_one_paragraph_reembeds_only_its_chunk(app: App, embedder: FastEmbedder, kb_dir: Path) -> None:
    app.sync()
    total = app.store.count_chunks("docs")
    write(kb_dir / "handbook.md", _long_markdown(edited=3))
    embedded, reports = _embedded_during(embedder, app.sync)
    assert reports[0].files_changed == 1
    assert embedded == 1
    assert app.store.count_chunks("docs") == total
    texts = [h.text for h in app.search("docs", SearchRequest(query="deputies", mode="keyword")).hits]
    assert any("named owners and their deputies" in t for t in texts)


def test_added_file_is_embedded_alone(app: App, embedder: FastEmbedder, kb_dir: Path) -> None:
    app.sync()
    write(kb_dir / "new.md", "# New\n\nA brand new page about quarterly budget planning.\n")
    embedded, reports = _embedded_during(embedder, app.sync)
    assert reports[0].files_added == 1 and embedded == 1


def test_deleted_file_loses_all_its_chunks(app: App, kb_dir: Path) -> None:
    app.sync()
    before = app.store.count_chunks("docs")
    handbook_chunks = chunk_table(app.store, "docs").count_rows("path = 'handbook.md'")
    (kb_dir / "handbook.md").unlink()
    report = app.sync()[0]
    assert report.files_deleted == 1 and report.chunks_deleted == handbook_chunks
    assert app.store.count_chunks("docs") == before - handbook_chunks
    assert "handbook.md" not in app.store.read_files("docs")


def test_renamed_file_reuses_its_vectors(app: App, embedder: FastEmbedder, kb_dir: Path) -> None:
    app.sync()
    (kb_dir / "faq.md").rename(kb_dir / "help.md")
    embedded, reports = _embedded_during(embedder, app.sync)
    assert embedded == 0 and reports[0].chunks_reused >= 1
    assert {r[1] for r in _rows(app)} == {"handbook.md", "help.md", "notes.txt"}


def test_changing_chunk_size_rebuilds_and_says_why(make_app: MakeApp, kb_dir: Path, embedder: FastEmbedder) -> None:
    kb = {"name": "docs", "description": "d", "paths": [str(kb_dir)]}
    make_app(kb).sync()
    small = make_app({**kb, "chunking": {"max_tokens": 64, "overlap": 8, "min_tokens": 10}})
    report = small.sync()[0]
    assert "chunking settings changed" in report.rebuilt
    assert report.chunks_total > SECTIONS and report.files_added == 3
    assert all(row["n_tokens"] <= 64 for row in chunk_table(small.store, "docs").to_arrow().to_pylist())


def test_changing_the_model_folder_rebuilds(
    make_config: MakeConfig, kb_dir: Path, app: App, model_folder: Path, tmp_path: Path
) -> None:
    import shutil

    from mcp_kb.app import App
    from mcp_kb.models.fastembed import FastEmbedder

    app.sync()
    # Another model file: the same weights plus an unknown protobuf field (field 1000, 4 bytes), which
    # ONNX Runtime ignores; only the file's identity differs, as with a re-exported model.
    other_folder = shutil.copytree(model_folder, tmp_path / "other-model")
    with open(other_folder / "model.onnx", "ab") as onnx:
        onnx.write(bytes([0xC2, 0x3E, 4]) + b"copy")
    config = make_config({"name": "docs", "description": "d", "paths": [str(kb_dir)]})
    other = config.embedding.model_copy(update={"model_path": str(other_folder)})
    assert isinstance(other, FastembedSettings)
    rebuilt = App(config.model_copy(update={"embedding": other}), embedder=FastEmbedder(other)).sync()[0]
    assert "embedding model changed" in rebuilt.rebuilt
    assert rebuilt.chunks_embedded == rebuilt.chunks_total


def test_bad_files_are_reported_and_the_rest_is_indexed(app: App, kb_dir: Path) -> None:
    (kb_dir / "corrupt.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf")
    (kb_dir / "fake.md").write_bytes(b"\x00\x01\x02binary" * 50)
    write(kb_dir / "bad.json", "{not json")
    text_pdf(kb_dir / "good.pdf", ["A valid PDF page about onboarding."])
    report = app.sync()[0]
    failed = {f.path: f.reason for f in report.failures}
    assert set(failed) == {"corrupt.pdf", "bad.json"}
    assert any(s.path == "fake.md" and "binary" in s.reason for s in report.skipped)
    assert report.files_added == 4 and report.files_failed == 2 and "good.pdf" in {r[1] for r in _rows(app)}
    assert {f.path for f in app.status("docs")[0].failed} == {"corrupt.pdf", "bad.json"}
    # Still failing and unchanged: reported again, not re-parsed.
    again = app.sync()[0]
    assert {f.path for f in again.failures} == {"corrupt.pdf", "bad.json"} and again.files_changed == 0


def test_file_that_becomes_unparsable_loses_its_old_chunks(app: App, kb_dir: Path) -> None:
    app.sync()
    write(kb_dir / "faq.json", '[{"q": "a"}]')
    app.sync()
    write(kb_dir / "faq.json", "{broken")
    report = app.sync()[0]
    assert report.failures[0].path == "faq.json"
    assert "faq.json" not in {r[1] for r in _rows(app)}


def test_second_sync_says_clearly_that_one_is_running(app: App) -> None:
    with sync_lock(app.store, ["docs"]):
        with pytest.raises(SyncBusyError, match="already running"):
            app.sync(SyncRequest(wait=False))


# ---- processes: crash and concurrency ----------------------------------------------------------


def _many_files(folder: Path, count: int) -> None:
    for i in range(count):
        write(folder / f"page{i:03d}.md", f"# Page {i}\n\nTopic {i}: notes on subject number {i} and its details.\n")


def _config_file(tmp_path: Path, folder: Path, storage: Path) -> Path:
    path = tmp_path / f"kb-{storage.name}.toml"
    path.write_text(f'storage = "{storage}"\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{folder}"]\n')
    return path


def _sync_process(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )


def _clean_build_rows(
    make_app: MakeApp, folder: Path, kb: dict[str, Any] | None = None
) -> list[tuple[str, str, str, tuple[float, ...]]]:
    kb = kb or {"name": "docs", "description": "d", "paths": [str(folder)]}
    clean = make_app(kb, storage=str(folder.parent / "clean"))
    clean.sync()
    return _rows(clean)


def test_sigkill_mid_sync_is_repaired_by_the_next_sync(tmp_path: Path, make_app: MakeApp) -> None:
    folder = tmp_path / "many"
    _many_files(folder, 320)  # ten commits: a window wide enough to land a kill in
    storage = tmp_path / "crash"
    config = _config_file(tmp_path, folder, storage)
    process = _sync_process(config)
    app = make_app({"name": "docs", "description": "d", "paths": [str(folder)]}, storage=str(storage))
    deadline = time.time() + 120
    while time.time() < deadline:
        table = cast(LanceStore, app.store).chunk_table("docs") if storage.exists() else None
        if table is not None and 0 < table.count_rows() < 320:
            break
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert app.store.count_chunks("docs") < 320, "the sync finished before it could be killed"
    report = app.sync()[0]
    assert report.files_failed == 0
    assert _rows(app) == _clean_build_rows(make_app, folder)


def test_two_sync_processes_at_once_leave_no_duplicates(tmp_path: Path, make_app: MakeApp) -> None:
    folder = tmp_path / "many"
    _many_files(folder, 60)
    storage = tmp_path / "shared-index"
    config = _config_file(tmp_path, folder, storage)
    first, second = _sync_process(config), _sync_process(config)
    assert first.wait(timeout=300) == 0 and second.wait(timeout=300) == 0, (
        second.stderr and second.stderr.read().decode()
    )
    app = make_app({"name": "docs", "description": "d", "paths": [str(folder)]}, storage=str(storage))
    rows = _rows(app)
    assert len({r[0] for r in rows}) == len(rows) == 60
    assert rows == _clean_build_rows(make_app, folder)


def test_searches_during_a_sync_see_one_consistent_version(tmp_path: Path, make_app: MakeApp) -> None:
    folder = tmp_path / "live"
    _many_files(folder, 40)
    app = make_app({"name": "docs", "description": "d", "paths": [str(folder)]})
    app.sync()
    for i in range(40):  # change every file: the sync rewrites them batch by batch
        write(folder / f"page{i:03d}.md", f"# Page {i}\n\nRevised topic {i}: updated notes on subject {i}.\n")
    errors: list[BaseException] = []
    sync_thread = threading.Thread(target=lambda: errors.extend(_catch(app.sync)))
    sync_thread.start()
    reads = 0
    while sync_thread.is_alive() or reads == 0:
        hits = app.search("docs", SearchRequest(query="notes on subject", mode="keyword", top_k=50)).hits
        assert len({h.source for h in hits}) == len(hits)  # one chunk per file: never old and new together
        table = chunk_table(app.store, "docs")
        paths = table.to_arrow().column("path").to_pylist()
        assert len(paths) == len(set(paths)) == 40  # never a file twice, never a file missing
        reads += 1
    sync_thread.join()
    assert not errors and reads > 1


def _catch(work: Callable[[], object]) -> list[BaseException]:
    try:
        work()
        return []
    except BaseException as exc:  # surfaced by the test's assertion
        return [exc]


def test_a_reader_keeps_working_when_another_process_rebuilds(make_app: MakeApp, kb_dir: Path) -> None:
    kb = {"name": "docs", "description": "d", "paths": [str(kb_dir)]}
    reader, writer = make_app(kb), make_app(kb)  # separate Store handles, as two processes have
    writer.sync()
    assert reader.search("docs", SearchRequest(query="password portal", mode="keyword")).hits
    writer.sync(SyncRequest(full=True))
    write(kb_dir / "faq.md", "# FAQ\n\n## Reset password\n\nAsk the helpdesk to reset a password.\n")
    writer.sync()
    hits = reader.search("docs", SearchRequest(query="helpdesk password", mode="keyword")).hits
    assert hits and "helpdesk" in hits[0].text


# ---- trust: rebuilds, models, unavailable sources, odd files -----------------------------------


class _FailingEmbedder:
    """The real model, failing after `batches` passage batches (a model that dies mid-rebuild)."""

    def __init__(self, real: FastEmbedder, batches: int) -> None:
        self.real, self.batches_left = real, batches
        self.identity = real.identity

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.batches_left == 0:
            raise ModelError("the model stopped answering")
        self.batches_left -= 1
        return self.real.embed_batch(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)

    def release_batches(self) -> None:
        self.real.release_batches()


def test_full_rebuild_keeps_answering_searches_from_the_old_index(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    _many_files(folder, 80)
    app = make_app({"name": "docs", "description": "d", "paths": [str(folder)]})
    app.sync()
    errors: list[BaseException] = []
    rebuild = threading.Thread(target=lambda: errors.extend(_catch(lambda: app.sync(SyncRequest(full=True)))))
    rebuild.start()
    answers: list[int] = []
    while rebuild.is_alive() or not answers:
        answers.append(len(app.search("docs", SearchRequest(query="notes on subject", mode="keyword", top_k=10)).hits))
    rebuild.join()
    assert not errors and len(answers) > 1
    assert min(answers) == 10, f"{answers.count(0)} of {len(answers)} searches came back empty"
    assert app.store.count_chunks("docs") == 80


def test_an_interrupted_rebuild_leaves_the_old_index_and_the_next_sync_resumes_it(
    make_app: MakeApp, make_config: MakeConfig, kb_dir: Path, embedder: FastEmbedder, tmp_path: Path
) -> None:
    from mcp_kb.app import App

    folder = tmp_path / "many"
    for i in range(100):  # long enough that smaller chunks mean new chunk texts (nothing to reuse)
        write(folder / f"page{i:03d}.md", f"# Page {i}\n\n" + f"Topic {i}: notes on subject number {i}. " * 12)
    kb = {"name": "docs", "description": "d", "paths": [str(folder)]}
    first = make_app(kb)
    first.sync()
    before = _rows(first)
    small = {**kb, "chunking": {"max_tokens": 64, "overlap": 8, "min_tokens": 10}}
    dying = App(make_config(small), embedder=cast(Embedder, _FailingEmbedder(embedder, batches=1)))
    old_generation = dying.store.active_generation("docs")
    with pytest.raises(ModelError):
        dying.sync()
    reader = make_app(kb)
    assert reader.store.active_generation("docs") == old_generation and _rows(reader) == before
    assert reader.search("docs", SearchRequest(query="subject number 7", mode="keyword")).hits
    assert reader.status("docs")[0].last_outcome == "failed"
    resumed = make_app(small)
    embedded, reports = _embedded_during(embedder, resumed.sync)
    assert "chunking settings changed" in reports[0].rebuilt
    assert reports[0].files_added == 100 - 32  # the batch written before the failure is kept
    assert resumed.store.active_generation("docs") != old_generation
    assert _rows(resumed) == _clean_build_rows(make_app, folder, small)
    kept = (resumed.store.active_generation("docs"), old_generation)  # version 1 still reads the old one
    assert isinstance(resumed.store, LanceStore)
    assert {name for name in resumed.store.db.list_tables().tables if name.startswith("docs__")} == {
        f"docs__{kind}__{generation}" for kind in ("chunks", "files", "reading") for generation in kept
    }


def test_cached_answers_never_outlive_a_full_rebuild(app: App, kb_dir: Path) -> None:
    app.sync()
    assert [
        h.source for h in app.search("docs", SearchRequest(query="release train calendar", mode="keyword")).hits
    ] == ["notes.txt"]
    (kb_dir / "notes.txt").unlink()
    app.sync(SyncRequest(full=True))
    assert app.search("docs", SearchRequest(query="release train calendar", mode="keyword")).hits == []


def test_a_corrupt_model_file_is_refused_before_anything_is_dropped(
    app: App, make_config: MakeConfig, kb_dir: Path, tmp_path: Path
) -> None:
    from mcp_kb.app import App
    from mcp_kb.models.fastembed import FastEmbedder
    from mcp_kb.errors import ModelError

    app.sync()
    before = _rows(app)
    broken = tmp_path / "broken-model"
    broken.mkdir()
    assert isinstance(app.config.embedding, FastembedSettings) and app.config.embedding.model_path
    source = Path(app.config.embedding.model_path)
    for item in source.iterdir():
        if item.name != "model.onnx":
            (broken / item.name).symlink_to(item)
    (broken / "model.onnx").write_bytes((source / "model.onnx").read_bytes()[:1_000_000])  # truncated
    config = make_config({"name": "docs", "description": "d", "paths": [str(kb_dir)]})
    embedding = config.embedding.model_copy(update={"model_path": str(broken)})
    assert isinstance(embedding, FastembedSettings)
    with pytest.raises(ModelError):
        App(config.model_copy(update={"embedding": embedding}), embedder=FastEmbedder(embedding)).sync()
    assert _rows(app) == before
    assert app.search("docs", SearchRequest(query="password portal")).hits


def test_an_empty_folder_is_an_unavailable_source_not_a_deletion(app: App, kb_dir: Path) -> None:
    from mcp_kb.errors import MassDeleteError

    app.sync()
    chunks = app.store.count_chunks("docs")
    for path in kb_dir.iterdir():
        path.unlink()  # what an unmounted share looks like: an empty mount point
    with pytest.raises(MassDeleteError, match=r"would delete 3 of its 3 documents .*--allow-mass-delete"):
        app.sync()
    assert app.store.count_chunks("docs") == chunks
    assert "would delete 3" in app.status("docs")[0].last_error
    report = app.sync(SyncRequest(allow_mass_delete=True))[0]
    assert report.files_deleted == 3 and app.store.count_chunks("docs") == 0


def test_deleting_most_of_a_large_kb_at_once_is_refused(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.errors import MassDeleteError

    folder = tmp_path / "many"
    _many_files(folder, 50)
    app = make_app({"name": "docs", "description": "d", "paths": [str(folder)], "sync": {"max_delete_share": 0.5}})
    app.sync()
    for i in range(30):  # a subfolder's share went away, say: 30 of 50 is more than half
        (folder / f"page{i:03d}.md").unlink()
    with pytest.raises(MassDeleteError, match="more than 50% of it is gone"):
        app.sync()
    for i in range(30, 35):
        (folder / f"page{i:03d}.md").unlink()
    assert app.sync(SyncRequest(allow_mass_delete=True))[0].files_deleted == 35


def test_deleting_a_few_files_of_a_small_kb_needs_no_permission(app: App, kb_dir: Path) -> None:
    app.sync()
    (kb_dir / "faq.md").unlink()
    (kb_dir / "notes.txt").unlink()
    assert app.sync()[0].files_deleted == 2


def test_a_missing_folder_keeps_the_index_searchable_and_its_status_readable(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "share"
    write(folder / "guide.md", "# Guide\n\nThe deployment guide explains rollbacks.\n")
    kb = {"name": "docs", "description": "d", "paths": [str(folder)]}
    make_app(kb).sync()
    folder.rename(tmp_path / "unmounted")
    app = make_app(kb)  # the config loads although the path is gone
    assert app.search("docs", SearchRequest(query="rollbacks", mode="keyword")).hits[0].source == "guide.md"
    with pytest.raises(KBError, match="cannot read .*share.*keeps its last good version"):
        app.sync()
    status = app.status("docs")[0]
    assert status.files == 1 and status.last_outcome == "failed" and "cannot read" in status.last_error


def test_an_unreadable_file_keeps_its_indexed_version(app: App, kb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_kb.sync

    app.sync()
    write(kb_dir / "faq.md", "# FAQ\n\n## Reset password\n\nA new answer that cannot be read yet.\n")
    real_hash = file_sha256  # what mcp_kb.sync hashes with

    def flaky(path: Path) -> str:
        if path.name == "faq.md":
            raise PermissionError(13, "Permission denied")
        return real_hash(path)

    monkeypatch.setattr(mcp_kb.sync, "file_sha256", flaky)
    report = app.sync()[0]
    assert report.files_deleted == 0 and report.files_unchanged == 2 and report.files_failed == 1
    assert [f.path for f in report.failures] == ["faq.md"] and "indexed version is kept" in report.failures[0].reason
    assert app.search("docs", SearchRequest(query="self-service portal", mode="keyword")).hits[0].source == "faq.md"


def test_odd_files_never_stop_a_sync(app: App, kb_dir: Path, tmp_path: Path) -> None:
    os.symlink("loop.md", kb_dir / "loop.md")
    with open(os.fsencode(kb_dir) + b"/caf\xe9.md", "wb") as handle:
        handle.write(b"# Cafe\n\nEspresso machines are descaled every Friday.\n")
    write(kb_dir / "only-heading.md", "# Quarterly OKR planning\n\n## Goals\n")
    write(kb_dir / "only-front-matter.md", "---\ntitle: Draft\n---\n")
    write(tmp_path / "secret.txt", "the launch codes are 0000")
    os.symlink(tmp_path / "secret.txt", kb_dir / "secret.txt")
    write(kb_dir / "front.md", "---\nyear: .inf\nsize: 1e400\n---\n# Front\n\nFront matter with odd numbers.\n")
    report = app.sync()[0]
    assert report.files_added == 6 and report.files_failed == 1  # handbook, faq, notes, café, only-heading, front
    assert {f.path: f.reason for f in report.failures} == {
        "only-front-matter.md": "nothing to index: the file has no text"
    }
    skipped = {s.path: s.reason for s in report.skipped}
    assert "broken symbolic link" in skipped["loop.md"] and "outside the knowledge base" in skipped["secret.txt"]
    assert app.search("docs", SearchRequest(query="espresso descaled", mode="keyword")).hits[0].source == "caf\\xe9.md"
    assert app.search("docs", SearchRequest(query="launch codes", mode="keyword")).hits == []
    assert app.search("docs", SearchRequest(query="OKR planning", mode="keyword")).hits[0].source == "only-heading.md"
    assert app.sync()[0].files_unchanged == 6


def test_odd_front_matter_values_fail_nothing(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "---\nyear: .inf\n---\n# A\n\nFirst page.\n")
    write(folder / "b.md", "---\nyear: 100000000000000000000000000\n---\n# B\n\nSecond page.\n")
    write(folder / "c.md", "---\nyear: 2024\n---\n# C\n\nThird page.\n")
    app = make_app(
        {"name": "docs", "description": "d", "paths": [str(folder)], "filterable": {"year": {"type": "integer"}}}
    )
    report = app.sync()[0]
    assert report.files_added == 3 and report.files_failed == 0
    hits = app.search("docs", SearchRequest(query="page", mode="filter", filters={"year": 2024})).hits
    assert [h.source for h in hits] == ["c.md"]


def test_an_index_in_the_layout_before_generations_is_served_then_rebuilt_beside_itself(
    app: App, embedder: FastEmbedder
) -> None:
    import shutil

    app.sync()
    storage = Path(app.config.storage.uri)
    generation = app.store.active_generation("docs")
    for kind in ("chunks", "files"):  # lay the tables out as the previous version named them
        shutil.copytree(storage / f"docs__{kind}__{generation}.lance", storage / f"docs__{kind}.lance")
    state = app.store.read_state("docs")
    legacy_fingerprints = {key: value for key, value in state.fingerprints.items() if key != "layout"}
    app.store.write_state("docs", replace(state, fingerprints=legacy_fingerprints, generation=None))
    app.store.drop_generations("docs", keep={""})
    legacy = type(app)(app.config, embedder=embedder)
    assert legacy.store.active_generation("docs") == ""
    assert legacy.search("docs", SearchRequest(query="password portal", mode="keyword")).hits
    embedded, reports = _embedded_during(embedder, legacy.sync)
    assert "index layout changed" in reports[0].rebuilt and embedded == 0
    assert not (storage / "docs__chunks.lance").exists()
    assert legacy.search("docs", SearchRequest(query="password portal", mode="keyword")).hits


@pytest.mark.parametrize("damaged", ["chunks", "files"])
def test_an_index_whose_tables_are_damaged_fails_the_sync_until_a_full_one_rebuilds_it(
    app: App, embedder: FastEmbedder, damaged: str
) -> None:
    """Manifests overwritten (a bad disk, a half-restored backup): a sync fails with what to run, changing
    nothing, and status says so too; `--full` reads and embeds every source into a new generation, and the damaged tables go."""
    from mcp_kb.errors import StoreError

    app.sync()
    storage = Path(app.config.storage.uri)
    broken = storage / f"docs__{damaged}__{app.store.active_generation('docs')}.lance"
    for manifest in (broken / "_versions").iterdir():
        manifest.write_bytes(b"garbage\n")
    fresh = type(app)(app.config, embedder=embedder)  # a new process: no table opened before the damage
    with pytest.raises(StoreError, match="could not open a table .*--full` .* to rebuild the KB from its sources"):
        fresh.sync()
    [status] = fresh.status("docs")  # status still answers, and says what to do
    assert status.last_outcome == "failed" and status.index_state.startswith("cannot be read now (damaged files")
    assert "a full sync (mcp-kb sync --full" in status.index_state and str(storage) not in status.index_state
    assert broken.exists()
    embedded, [rebuilt] = _embedded_during(embedder, lambda: fresh.sync(SyncRequest(full=True)))
    assert rebuilt.rebuilt == "the index tables were missing or could not be opened"
    assert rebuilt.files_failed == 0 and embedded == rebuilt.chunks_embedded == rebuilt.chunks_total > 0
    assert not broken.exists() and fresh.search("docs", SearchRequest(query="password portal", mode="keyword")).hits
    assert fresh.sync()[0].files_unchanged == 3


def test_a_root_gitignore_that_cannot_be_read_keeps_the_whole_kb(app: App, kb_dir: Path) -> None:
    app.sync()
    write(kb_dir / ".gitignore", "!\n")  # an invalid pattern: what it meant to hide is unknown
    report = app.sync()[0]
    assert report.files_deleted == 0 and report.files_failed == 3 and app.store.count_chunks("docs") > 0
    assert report.skipped == [Problem("/", report.skipped[0].reason)]
    assert report.skipped[0].reason.startswith("unreadable folder")


def test_a_ray_sync_without_ray_installed_says_what_to_install_and_writes_nothing(
    make_app: MakeApp, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as on a machine without the extra
    app = make_app({"name": "docs", "description": "d", "paths": [str(kb_dir)]}, sync={"engine": "ray"})
    with pytest.raises(KBError, match=r"needs Ray: pip install 'mcp-kb-server\[ray\]'"):
        app.sync()
    assert app.store.read_files("docs") == {}
    assert app.status("docs")[0].last_outcome == "failed"


def test_a_new_library_version_embeds_only_what_differs_and_each_version_answers_its_own_text(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """Adding 0.116 beside 0.110 leaves 0.110's documents alone and reuses the vectors of chunks both versions
    share; a search answers from the default version (the last listed) unless asked for another."""
    for version in ("0.110", "0.116"):
        for n in range(6):
            write(tmp_path / version / f"page{n}.md", f"# Page {n}\n\nShared guidance number {n} for every release.\n")
    write(tmp_path / "0.116" / "page0.md", "# Page 0\n\nNew in 0.116: lifespan handlers replace startup events.\n")
    write(tmp_path / "0.116" / "added.md", "# Added\n\nA page only 0.116 has.\n")

    def kb(*versions: str) -> dict[str, Any]:
        return {
            "name": "lib",
            "description": "d",
            "versions": [{"name": v, "paths": [str(tmp_path / v)]} for v in versions],
        }

    first = make_app(kb("0.110")).sync()[0]
    assert first.files_added == 6 and first.chunks_embedded == 6
    app = make_app(kb("0.110", "0.116"))
    second = app.sync()[0]
    assert (second.files_added, second.files_unchanged) == (7, 6)  # 0.110 was not read again
    assert (second.chunks_embedded, second.chunks_reused) == (2, 5)  # page0 and added.md; five shared pages reused
    new = app.search("lib", SearchRequest(query="startup events lifespan", mode="keyword"))
    old = app.search("lib", SearchRequest(query="shared guidance number 0", mode="keyword", version="0.110"))
    assert new.hits[0].source == "0.116/page0.md" and all(h.source.startswith("0.116/") for h in new.hits)
    assert old.hits[0].source == "0.110/page0.md" and all(h.source.startswith("0.110/") for h in old.hits)
    with pytest.raises(KBError, match="has no version '0.2'; its versions: 0.110, 0.116"):
        app.search("lib", SearchRequest(query="x", version="0.2"))
    (tmp_path / "0.110" / "page5.md").unlink()
    third = app.sync()[0]
    assert (
        third.files_deleted == 1
        and app.search("lib", SearchRequest(query="guidance number 5", mode="keyword", version="0.116")).hits
    )


def test_an_interrupted_rebuild_says_to_go_on_with_its_option_and_that_sync_resumes_it(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """Its remedy said "the next sync goes on from there": a plain sync keeps the old index and drops the
    unfinished rebuild, so the advice threw the work away."""
    for number in range(40):
        write(tmp_path / "notes" / f"n{number:02d}.md", f"# Note {number}\n\nThe meeting moved to room {number}.\n")
    app = make_app({"name": "notes", "description": "Notes", "paths": [str(tmp_path / "notes")]})
    app.sync()

    def ctrl_c_after_the_first_batch(done: int, total: int, message: str) -> None:
        if message.endswith(f"{done} of {total} files indexed") and done == 32:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        app.sync(SyncRequest(kb="notes", reembed=True), progress=ctrl_c_after_the_first_batch)
    [status] = app.status("notes")
    assert (
        "the next sync with --reembed goes on from there (one without it drops the unfinished rebuild)"
        in status.last_error
    )
    [resumed] = app.sync(SyncRequest(kb="notes", reembed=True))
    assert resumed.chunks_embedded < 40 and app.status("notes")[0].files == 40  # the first batch was not redone


def test_a_kb_that_ends_its_sync_with_no_document_says_why_and_its_searches_say_so(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """An empty folder synced to "0 added ... 0 in index" and searched to "No passages found. Try other words":
    the sync, the check and every search say the KB holds no document, what its sources held, and what to check."""
    folder = tmp_path / "notes"
    write(folder / "a.xyz", "not a type mcp-kb reads")
    write(folder / ".draft.md", "# Hidden\n\nA hidden draft.\n")
    write(folder / "b.md", "# B\n\nKept out by the globs.\n")
    app = make_app({"name": "notes", "description": "d", "paths": [str(folder)], "exclude": ["b.md"]})
    report = app.sync()[0]
    why = (
        "knowledge base 'notes' holds no documents: of what its sources hold, 1 hidden (names starting with a "
        "dot); 1 outside its include/exclude globs; 1 of types mcp-kb does not read (.xyz); check its paths, "
        "include and exclude in the config"
    )
    assert report.no_documents.startswith(why) and report.summary().splitlines()[-1] == f"  {report.no_documents}"
    assert app.check("notes")[0].no_documents == report.no_documents
    result = app.search("notes", SearchRequest(query="anything"))
    assert result.holds_nothing and result.notes == [report.no_documents]
    assert "Try other words" not in cited_text(result)
    write(folder / "c.md", "# C\n\nA document at last.\n")
    assert not app.sync()[0].no_documents
    assert not app.search("notes", SearchRequest(query="anything", mode="keyword")).holds_nothing


def test_two_projects_kbs_of_one_name_in_the_default_index_stay_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: FastEmbedder
) -> None:
    """Two kb.toml files naming no storage (the README's own example) and a KB "handbook" each shared the per-user
    index: the second project's sync took the first one's files for its own, and its searches answered with them,
    saying nothing. The second sync is refused naming both files and the fix; a search says whose documents it read."""
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    monkeypatch.delenv("MCP_KB_STORAGE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for project, days in (("alpha", 25), ("beta", 30)):
        write(tmp_path / project / "handbook" / "leave.md", f"# Leave\n\nAnnual leave at {project} is {days} days.\n")
        write(tmp_path / project / "kb.toml", '[[kb]]\nname = "handbook"\ndescription = "d"\npaths = ["./handbook"]\n')
    alpha, beta = (App(load_config(tmp_path / project / "kb.toml"), embedder=embedder) for project in ("alpha", "beta"))
    assert alpha.config.storage.uri == beta.config.storage.uri  # both in the default index
    alpha.sync()
    with pytest.raises(KBError) as refused:
        beta.sync()
    said = str(refused.value)
    assert f"belongs to another project ({tmp_path / 'alpha' / 'kb.toml'})" in said
    assert f'give {tmp_path / "beta" / "kb.toml"} an index of its own (storage = "./.mcp-kb"' in said
    assert alpha.status("handbook")[0].last_outcome == "ok"  # not recorded as a failure of alpha's KB
    assert beta.pending("handbook") is None  # nor counted against beta's folder, which is not what it was built from
    leave = SearchRequest(query="annual leave days", mode="keyword")
    assert beta.search("handbook", leave).notes == [
        "knowledge base 'handbook' in the default index was built by another project's kb.toml: these are that "
        'project\'s documents (give this project an index of its own: storage = "./.mcp-kb")'
    ]
    assert not alpha.search("handbook", leave).notes
    changes: list[Callable[[], object]] = [
        lambda: beta.tag(TagRequest(kb="handbook", name="beta-release")),
        lambda: beta.rollback(RollbackRequest(kb="handbook", to="1")),
    ]
    for change in changes:
        with pytest.raises(KBError, match="belongs to another project"):  # nor tags nor rolls back alpha's KB
            change()
    assert [version.tags for version in alpha.versions("handbook")] == [()]
    write(
        tmp_path / "beta" / "kb.toml",
        'storage = "./.mcp-kb"\n[[kb]]\nname = "handbook"\ndescription = "d"\npaths = ["./handbook"]\n',
    )
    own = App(load_config(tmp_path / "beta" / "kb.toml"), embedder=embedder)  # the fix the refusal names
    own.sync()
    assert "beta is 30 days" in own.search("handbook", leave).hits[0].text
    assert "alpha is 25 days" in alpha.search("handbook", leave).hits[0].text
