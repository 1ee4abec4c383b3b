"""The source seam: a third kind added as one module and one registration is synced, searched, read
back as a document and followed by the watcher like folders and web sites are."""

import json
from pathlib import Path

import pytest

from helpers import write
from mcp_kb.settings import SOURCE_KINDS
from mcp_kb.errors import ConfigError, KBError
from mcp_kb.ingest.sources import change_concerns, count_kinds, watch_folders
from mcp_kb.api import SearchRequest
from helpers import MakeApp
from helpers import MakeConfig


@pytest.fixture
def notes_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy kind registered for one test (the registry is left as it was after)."""
    from toy_notes_source import NotesSettings, NotesSource

    monkeypatch.setattr(SOURCE_KINDS, "_entries", dict(SOURCE_KINDS._entries))
    SOURCE_KINDS.register("notes", NotesSettings, NotesSource)  # the one registration line


def _export(path: Path, notes: list[tuple[str, str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps({"id": i, "title": t, "text": x}) for i, t, x in notes), encoding="utf-8")
    return path


def test_a_registered_kind_syncs_searches_and_reads_back_beside_a_folder(
    notes_kind: None, make_app: MakeApp, tmp_path: Path
) -> None:
    write(tmp_path / "docs" / "guide.md", "# Guide\n\nThe deploy runbook lives in the wiki.\n")
    export = _export(
        tmp_path / "notes.jsonl",
        [
            ("n1", "Parking", "Visitors park on level minus two."),
            ("n2", "Coffee", "The espresso machine is descaled on Fridays."),
        ],
    )
    app = make_app(
        {
            "name": "kb",
            "description": "d",
            "paths": [str(tmp_path / "docs")],
            "sources": [{"kind": "notes", "export": str(export)}],
        }
    )
    [report] = app.sync()
    assert report.files_added == 3 and report.crawl == {"notes": 2}
    hit = app.search("kb", SearchRequest(query="where do visitors park", mode="keyword")).hits[0]
    assert hit.source == "note:n1" and "level minus two" in hit.text
    assert "espresso" in app.document_text("kb", "note:n2")
    assert app.summary("kb").kinds == {"note": 2, "md": 1}

    _export(export, [("n1", "Parking", "Visitors park on level minus three.")])  # n2 removed, n1 edited
    [report] = app.sync()
    assert (report.files_changed, report.files_deleted, report.files_unchanged) == (1, 1, 1)
    assert "minus three" in app.search("kb", SearchRequest(query="visitors park", mode="keyword")).hits[0].text
    with pytest.raises(KBError, match="has no document 'note:n2'"):
        app.document_text("kb", "note:n2")


def test_the_watcher_follows_the_kinds_own_files(notes_kind: None, make_app: MakeApp, tmp_path: Path) -> None:
    export = _export(tmp_path / "exports" / "notes.jsonl", [("n1", "A", "alpha")])
    app = make_app({"name": "kb", "description": "d", "sources": [{"kind": "notes", "export": str(export)}]})
    sources = app.sources(app.config.kb[0])
    assert watch_folders(sources) == [export.parent]
    assert change_concerns(sources, export) and not change_concerns(sources, export.parent / "other.txt")
    assert count_kinds(["note:n1", "a/b.md", "https://x.org/guide/", "note:n2"]) == {"note": 2, "md": 1, "web page": 1}


def test_a_kinds_settings_are_checked_with_the_config(
    notes_kind: None, make_config: MakeConfig, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'kb\[kb\]\.sources\[0\]\.exprt'; did you mean 'export'\?"):
        make_config({"name": "kb", "description": "d", "sources": [{"kind": "notes", "exprt": "x"}]})
    with pytest.raises(ConfigError, match=r"unknown source kind 'wiki'; known: notes"):
        make_config({"name": "kb", "description": "d", "sources": [{"kind": "wiki"}]})


def test_without_registered_kinds_a_sources_table_is_refused(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match=r"unknown source kind 'notes'; known: \(none registered\)"):
        make_config({"name": "kb", "description": "d", "sources": [{"kind": "notes"}]})
