"""The app through its public functions: status, check, documents, chunk previews, summaries."""

from pathlib import Path

import pytest
from helpers import write

from mcp_kb.app import App
from mcp_kb.errors import KBError, ParseError, SearchError
from mcp_kb.api import SyncRequest
from mcp_kb.records import KBSummary
from mcp_kb.requests import EvaluateRequest, SelfCheckRequest
from helpers import MakeApp


@pytest.fixture
def app(make_app: MakeApp, tmp_path: Path) -> App:
    write(tmp_path / "docs" / "guide.md", "# Guide\n\n## Install\n\nRun the installer, then sign in.\n")
    write(tmp_path / "docs" / "notes.txt", "Release notes for the spring release.")
    return make_app({"name": "docs", "description": "Guides", "paths": [str(tmp_path / "docs")]})


def test_status_before_and_after_the_first_sync(app: App) -> None:
    [never] = app.status()
    assert never.last_outcome == "never synced" and never.files == 0 and never.generation is None
    app.sync()
    [status] = app.status("docs")
    assert status.last_outcome == "ok" and status.files == 2 and status.chunks >= 2
    assert status.model and status.model.dimension == 384 and status.generation and status.failed == ()


def test_glance_agrees_with_status_and_history_lists_recent_syncs(
    app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_kb.records

    monkeypatch.setattr(mcp_kb.records, "_SYNCS_KEPT", 3)
    for round_ in range(4):
        write(tmp_path / "docs" / "changing.md", f"# Changing\n\nRound {round_} of edits.\n")
        app.sync()
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4 not a PDF")
    app.sync()
    [status], glance = app.status("docs"), app.glance("docs")
    assert {key: getattr(glance, key) for key in ("files", "chunks", "last_sync", "last_outcome")} == {
        key: getattr(status, key) for key in ("files", "chunks", "last_sync", "last_outcome")
    }
    assert glance.failed_files == len(status.failed) == 1 and glance.seconds is not None and glance.seconds > 0
    recent = app.sync_history("docs").recent
    assert len(recent) == 3  # the oldest two were let go
    assert [(sync.changed, sync.failed) for sync in recent] == [(1, 0), (1, 0), (0, 1)]
    assert (app.chunk_text("docs", "guide.md", 0) or "").endswith("Run the installer, then sign in.")
    assert app.chunk_text("docs", "guide.md", 99) is None


def test_summary_says_what_the_kb_holds(app: App) -> None:
    assert app.summary("docs") == KBSummary()  # before the first sync
    app.sync()
    assert app.summary("docs").as_dict() == {
        "documents": 2,
        "kinds": {"md": 1, "txt": 1},
        "chunks": app.status()[0].chunks,
        "titles": ["Guide", "notes"],
    }


def test_check_counts_files_and_chunks_and_reports_an_unreadable_path(app: App, tmp_path: Path) -> None:
    [report] = app.check()
    assert report.files == 2 and report.by_type == {".md": 1, ".txt": 1} and report.chunks >= 2
    (tmp_path / "docs").rename(tmp_path / "gone")
    assert "cannot read" in app.check("docs")[0].error


def test_document_text_is_served_from_the_index_for_members_only(app: App, tmp_path: Path) -> None:
    write(tmp_path / "docs" / ".secret.md", "# Secret\n")
    app.sync()
    assert "Run the installer" in app.document_text("docs", "guide.md")
    with pytest.raises(KBError, match="knowledge base 'docs' has no document '.secret.md'"):
        app.document_text("docs", ".secret.md")


def test_chunks_preview_uses_the_sync_pipeline(app: App, tmp_path: Path) -> None:
    chunks, notes = app.chunks(tmp_path / "docs" / "guide.md")
    assert [c.heading for c in chunks] == ["Guide › Install"] and notes == ()
    write(tmp_path / "front-matter.md", "---\ntitle: Draft\n---\n")
    with pytest.raises(ParseError, match="nothing to index"):
        app.chunks(tmp_path / "front-matter.md")


def test_during_a_first_sync_the_glance_counts_what_it_has_written(make_app: MakeApp, tmp_path: Path) -> None:
    for number in range(40):  # two batches: 32 files a commit
        write(tmp_path / "notes" / f"n{number:02d}.md", f"# Note {number}\n\nThe meeting moved to room {number}.\n")
    app = make_app({"name": "notes", "description": "Notes", "paths": [str(tmp_path / "notes")]})
    seen = []

    def look(done: int, total: int, message: str) -> None:
        if message.endswith(f"{done} of {total} files indexed"):
            glance = app.glance("notes")
            seen.append((glance.files, glance.chunks > 0, glance.sync_running))

    app.sync(SyncRequest(kb="notes"), progress=look)
    assert seen[0] == (32, True, True)  # the first batch written: the page shows it, not 0 documents
    assert app.glance("notes").files == 40


@pytest.mark.parametrize("k", [0, 200])
def test_a_self_check_or_evaluation_out_of_bounds_says_what_to_send_not_a_traceback(app: App, k: int) -> None:
    """`mcp-kb eval --k` reaches the same request rules as every face: a KBError the CLI prints as one line."""
    app.sync()
    with pytest.raises(SearchError, match=f"top_k must be between 1 and 100, got {k}"):
        app.self_check(SelfCheckRequest(kb="docs", modes=("hybrid",), k=k))
    if k > 10:  # evaluate asks for at least 10 (its MRR and nDCG are @10)
        with pytest.raises(SearchError, match=f"top_k must be between 1 and 100, got {k}"):
            app.evaluate(
                EvaluateRequest(
                    kb="docs", queries={"q1": "install"}, judgements={"q1": {"guide": 1}}, modes=("hybrid",), k=k
                )
            )
