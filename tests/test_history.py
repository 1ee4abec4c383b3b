"""A KB's versions (history.py): each changing sync records one, retention and tags decide what is kept (and
compaction keeps what they read), searches, reads and listings answer as of one, and a rollback makes one current
again as a new version, whole under SIGKILL, after which a sync embeds only the differences."""

import json
import os
import re
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import chunk_table, write

import mcp_kb.index.upkeep as upkeep
from mcp_kb.api import (
    BrowseRequest,
    KBError,
    ReadRequest,
    RollbackRequest,
    SearchRequest,
    SyncBusyError,
    SyncRequest,
    TagRequest,
    VersionError,
)
from mcp_kb.app import App
from mcp_kb.index.state import sync_lock
from mcp_kb.records import SyncReport
from mcp_kb.search import SearchResult
from helpers import MakeApp


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(folder / "leave.md", "# Leave\n\nAnnual leave is twenty days a year.\n")
    write(folder / "travel.md", "# Travel\n\nTravel is by train, second class.\n")
    write(folder / "pay.md", "# Pay\n\nSalaries are paid on the 25th.\n")
    return folder


def _kb(docs: Path, **history: object) -> dict[str, Any]:
    return {
        "name": "docs",
        "description": "Staff handbook",
        "paths": [str(docs)],
        **({"history": history} if history else {}),
    }


@pytest.fixture
def app(make_app: MakeApp, docs: Path) -> App:
    app = make_app(_kb(docs))
    app.sync()
    return app


def _second_version(app: App, docs: Path) -> SyncReport:
    """Version 2: leave changed, travel removed, a new document about parking."""
    write(docs / "leave.md", "# Leave\n\nAnnual leave is thirty days a year since the new policy.\n")
    (docs / "travel.md").unlink()
    write(docs / "parking.md", "# Parking\n\nParking permits are issued by the front desk.\n")
    return app.sync()[0]


def _texts(result: SearchResult) -> list[str]:
    return sorted(hit.text for hit in result.hits)


def _search(app: App, query: str, **kw: Any) -> SearchResult:
    return app.search("docs", SearchRequest(query=query, top_k=10, mode="keyword", **kw))


def test_each_sync_that_changes_a_kb_records_a_version_and_one_that_changes_nothing_does_not(
    app: App, docs: Path
) -> None:
    _second_version(app, docs)
    app.sync()  # nothing changed
    app.sync(SyncRequest(full=True))  # a rebuild is a version too
    listed = [version.as_dict() for version in app.versions("docs")]
    assert [(v["number"], v["kind"], v["added"], v["changed"], v["removed"]) for v in listed] == [
        (1, "sync", 3, 0, 0),
        (2, "sync", 1, 1, 1),
        (3, "rebuild", 3, 0, 0),
    ]  # a rebuild adds all to its generation
    assert all(
        _time(str(v["finished"])) >= _time(str(v["started"])) and v["by"] == "" and v["tags"] == [] for v in listed
    )


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_search_read_and_list_answer_as_of_a_number_a_tag_or_a_time_and_say_which(app: App, docs: Path) -> None:
    first_finished = app.versions("docs")[0].finished
    app.tag(TagRequest(kb="docs", name="handbook-2025"))
    _second_version(app, docs)
    for as_of in ("1", "handbook-2025", first_finished):
        then = _search(app, "annual leave days", as_of=as_of)
        assert "Annual leave is twenty days a year." in _texts(then)
        assert then.notes[0].startswith("answered as of version 1 (handbook-2025)")
    that_day = _search(app, "annual leave days", as_of=first_finished[:10])  # a date: the version current at its end
    assert that_day.notes[0].startswith("answered as of version 2 of")
    now = _search(app, "annual leave days")
    assert "Annual leave is thirty days a year since the new policy." in _texts(now) and not now.notes
    old = app.read("docs", ReadRequest(kb="docs", path="travel.md", as_of="handbook-2025"))
    assert "second class" in old.text and old.as_of and old.as_of.startswith("version 1")
    with pytest.raises(KBError, match="no document 'travel.md'"):
        app.read("docs", ReadRequest(kb="docs", path="travel.md"))
    listed = app.browse("docs", BrowseRequest(kb="docs", as_of="1"))
    assert [d.path for d in listed.documents] == ["leave.md", "pay.md", "travel.md"] and listed.as_of


def test_a_cursor_given_as_of_a_version_reads_on_in_that_version(app: App, docs: Path) -> None:
    write(docs / "long.md", "# Long\n\n" + "\n\n".join(f"Rule {n} says the old thing." for n in range(200)) + "\n")
    app.sync()
    write(docs / "long.md", "# Long\n\nNow short.\n")
    app.sync()
    first = app.read("docs", ReadRequest(kb="docs", path="long.md", as_of="2", max_tokens=200))
    assert first.cursor
    then = app.read("docs", ReadRequest(kb="docs", cursor=first.cursor, max_tokens=200))  # no as_of: the cursor's
    assert "old thing" in then.text and then.as_of == first.as_of
    pages = app.browse("docs", BrowseRequest(kb="docs", as_of="1", limit=1))
    nxt = app.browse("docs", BrowseRequest(kb="docs", cursor=pages.cursor, limit=5))
    assert [d.path for d in nxt.documents] == ["pay.md", "travel.md"] and nxt.as_of == pages.as_of


@pytest.mark.parametrize(
    ("as_of", "said"),
    [
        ("nope", "has no tag 'nope' (it has no tags)"),
        ("7", "has no version 7 yet (the newest is 2)"),
        ("2001-01-01", "kept no version as old as 2001-01-01; the oldest kept is version 1 of"),
        ("2026-13-45", "is not a time as_of understands"),
        # digits that are not ASCII: str.isdigit took "²" (then int() failed: an internal error), int() took "٣" and "３"
        ("²", "has no tag '²'"),
        ("٣", "has no tag '٣'"),
        ("３", "has no tag '３'"),
        ("٢٠٢٦-٠١-٠١", "has no tag"),
    ],
)
def test_an_as_of_that_names_no_kept_version_is_one_clear_line(app: App, docs: Path, as_of: str, said: str) -> None:
    _second_version(app, docs)
    with pytest.raises(VersionError, match=f"^[^\n]*{re.escape(said)}"):
        _search(app, "leave", as_of=as_of)
    with pytest.raises(VersionError, match=re.escape(said)):
        app.read("docs", ReadRequest(kb="docs", path="leave.md", as_of=as_of))


def test_retention_keeps_the_newest_and_the_tagged_versions_and_compaction_keeps_what_they_read(
    make_app: MakeApp, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep, "_MAX_SMALL_FRAGMENTS", 0)  # compact after every sync ...
    monkeypatch.setattr(upkeep, "_UNKEPT_VERSIONS_AGE", timedelta(milliseconds=1))  # ... and clean all it may at once
    app = make_app(_kb(docs, keep=2, keep_days=0))
    app.sync(SyncRequest(tag="first"))
    for n in range(4):
        write(docs / "pay.md", f"# Pay\n\nSalaries are paid on day {n + 20}.\n")
        app.sync()
    assert [(v.number, v.tags) for v in app.versions("docs")] == [(1, ("first",)), (4, ()), (5, ())]
    assert "Travel is by train, second class." in _texts(_search(app, "train", as_of="first"))
    assert "Salaries are paid on day 22." in _texts(_search(app, "salaries paid", as_of="4"))
    with pytest.raises(
        VersionError, match="version 2 of knowledge base 'docs' is no longer kept; the oldest kept is version 1"
    ):
        _search(app, "salaries", as_of="2")
    chunks = chunk_table(app.store, "docs")
    assert len(chunks.list_versions()) < 5 * 3  # what only forgotten versions read was cleaned up


def test_a_tag_is_checked_and_unique_and_a_removed_one_is_gone(app: App, docs: Path) -> None:
    with pytest.raises(VersionError, match="'12' is not a tag name"):
        app.tag(TagRequest(kb="docs", name="12"))  # a number would read as a version
    for spoiled in ("a\n", "a\nb", "ok\r"):  # "a\n" was taken, and shown as two lines by `versions`
        with pytest.raises(VersionError, match="is not a tag name"):
            app.tag(TagRequest(kb="docs", name=spoiled))
        with pytest.raises(VersionError, match="is not a tag name"):
            app.sync(SyncRequest(tag=spoiled))
    with pytest.raises(VersionError, match="has no version 9 yet"):
        app.tag(TagRequest(kb="docs", name="ok", version=9))
    app.tag(TagRequest(kb="docs", name="ok"))
    with pytest.raises(VersionError, match="already has the tag 'ok' \\(on version 1\\)"):
        app.tag(TagRequest(kb="docs", name="ok"))
    app.tag(TagRequest(kb="docs", name="ok", remove=True))
    assert app.versions("docs")[0].tags == ()
    with pytest.raises(VersionError, match="has no tag 'ok'; nothing was changed"):
        app.tag(TagRequest(kb="docs", name="ok", remove=True))
    with pytest.raises(KBError, match="unknown knowledge base|no knowledge base"):
        app.tag(TagRequest(kb="nosuch", name="ok"))


def test_a_sync_that_changes_nothing_tags_the_current_version_and_tags_are_bounded(
    app: App, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_kb.kept_versions as kept_versions

    app.sync(SyncRequest(tag="nightly-1"))  # nothing changed: no new version, the current one is tagged
    assert [(v.number, v.tags) for v in app.versions("docs")] == [(1, ("nightly-1",))]
    monkeypatch.setattr(kept_versions, "MAX_TAGS", 2)
    app.tag(TagRequest(kb="docs", name="nightly-2"))
    write(docs / "pay.md", "# Pay\n\nSalaries are paid on the 28th.\n")
    with pytest.raises(VersionError, match="has 2 tags, the most it keeps: remove one first"):
        app.sync(SyncRequest(tag="nightly-3"))  # refused before it reads a file
    assert [(v.number, v.tags) for v in app.versions("docs")] == [(1, ("nightly-1", "nightly-2"))]
    assert "Salaries are paid on the 25th." in _texts(_search(app, "salaries paid"))


def test_a_rollback_makes_an_earlier_version_current_as_a_new_one_and_the_next_sync_embeds_only_differences(
    app: App, docs: Path
) -> None:
    before = _texts(_search(app, "leave travel pay days"))
    _second_version(app, docs)
    made = app.rollback(RollbackRequest(kb="docs", to="1"))
    assert (made.number, made.kind, made.rolled_back_to) == (3, "rollback", 1)
    assert (made.added, made.changed, made.removed) == (1, 1, 1)  # travel back, leave as it was, parking gone
    assert _texts(_search(app, "leave travel pay days")) == before
    assert [v.number for v in app.versions("docs")] == [1, 2, 3]
    report = app.sync()[0]  # the sources are still at version 2: what differs comes back, nothing else
    assert (report.files_added, report.files_changed, report.files_deleted, report.files_unchanged) == (1, 1, 1, 1)
    assert report.chunks_embedded == 2  # parking and the new leave: their vectors were not in version 1's table


def test_a_rollback_across_a_rebuild_switches_back_to_the_old_generation(app: App, docs: Path) -> None:
    old_generation = app.store.active_generation("docs")
    app.sync(SyncRequest(full=True))
    assert app.store.active_generation("docs") != old_generation
    app.rollback(RollbackRequest(kb="docs", to="1"))
    assert app.store.active_generation("docs") == old_generation
    assert "Annual leave is twenty days a year." in _texts(_search(app, "annual leave"))
    report = app.sync()[0]
    assert not report.rebuilt and report.chunks_embedded == 0


def test_a_rollback_while_a_sync_runs_or_to_the_current_version_changes_nothing(app: App, docs: Path) -> None:
    _second_version(app, docs)
    with sync_lock(app.store, ["docs"]):
        with pytest.raises(SyncBusyError, match="already running.*; roll back when it has ended; nothing was changed"):
            app.rollback(RollbackRequest(kb="docs", to="1"))
        with pytest.raises(SyncBusyError, match="already running.*; tag when it has ended"):
            app.tag(TagRequest(kb="docs", name="during-sync"))
    with pytest.raises(VersionError, match="version 2 of knowledge base 'docs' is already the current one"):
        app.rollback(RollbackRequest(kb="docs", to="2"))
    with pytest.raises(VersionError, match="has no tag 'gone'"):
        app.rollback(RollbackRequest(kb="docs", to="gone"))
    assert [v.number for v in app.versions("docs")] == [1, 2]
    assert "Parking permits are issued by the front desk." in _texts(_search(app, "parking permits"))


_KILLED_ROLLBACK = textwrap.dedent("""
    import os, signal, sys
    from lancedb.table import LanceTable
    from mcp_kb.api import App, RollbackRequest
    from mcp_kb.settings import load_config

    restores, kill_at = [], int(sys.argv[2])
    original = LanceTable.restore

    def restore(self, version=None):
        restores.append(version)
        if len(restores) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, version)

    LanceTable.restore = restore
    App(load_config(sys.argv[1])).rollback(RollbackRequest(kb="docs", to="1"))
""")


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_rollback_killed_at_any_table_leaves_readers_on_a_whole_version_and_the_next_sync_finishes_it(
    make_app: MakeApp, docs: Path, tmp_path: Path, kill_at: int
) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'[storage]\nuri = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    app = make_app(_kb(docs))
    app.sync()
    _second_version(app, docs)
    current = _texts(_search(app, "leave travel pay parking days"))
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_ROLLBACK, str(config), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert killed.returncode == -9, killed.stderr
    assert _texts(_search(app, "leave travel pay parking days")) == current  # version 2, whole
    assert [d.path for d in app.browse("docs", BrowseRequest(kb="docs")).documents] == [
        "leave.md",
        "parking.md",
        "pay.md",
    ]
    app.sync()  # finishes the rollback (version 3), then brings the index to the sources (version 4)
    assert [(v.number, v.kind) for v in app.versions("docs")] == [
        (1, "sync"),
        (2, "sync"),
        (3, "rollback"),
        (4, "sync"),
    ]
    for path in ("leave.md", "parking.md", "pay.md"):
        assert app.read("docs", ReadRequest(kb="docs", path=path)).text == (docs / path).read_text()  # the file itself
    assert _texts(_search(app, "leave travel pay parking days")) == current


def test_versions_are_listed_by_the_command_line_and_as_json(app: App, docs: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mcp_kb.cli import main

    _second_version(app, docs)
    config = tmp_path / "kb.toml"
    config.write_text(
        f'[storage]\nuri = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    runner = CliRunner()
    tagged = runner.invoke(main, ["tag", "docs", "v1", "--version", "1", "-c", str(config)])
    assert tagged.exit_code == 0 and "tagged 'v1' on version 1" in tagged.output
    text = runner.invoke(main, ["versions", "docs", "-c", str(config)]).output.splitlines()
    assert "sync: +3 ~0 -0 [v1]" in text[0] and "sync: +1 ~1 -1" in text[1]
    listed = json.loads(runner.invoke(main, ["versions", "docs", "-c", str(config), "--json"]).output)
    assert [v["tags"] for v in listed] == [["v1"], []]
    rolled = runner.invoke(main, ["rollback", "docs", "--to", "v1", "-c", str(config)])
    assert rolled.exit_code == 0 and "version 1 is current again, as version 3" in rolled.output
    bad = runner.invoke(main, ["search", "docs", "leave", "--as-of", "nope", "-c", str(config)])
    assert bad.exit_code == 1 and bad.output.count("\n") == 1 and "has no tag 'nope'" in bad.output
    superscript = runner.invoke(main, ["rollback", "docs", "--to", "²", "-c", str(config)])  # was a traceback
    assert superscript.exit_code == 1 and superscript.output == (
        "Error: knowledge base 'docs' has no tag '²' (its tags: v1); as_of takes a version number, a tag or a time\n"
    )
    huge = runner.invoke(main, ["rollback", "docs", "--to", "7" * 5000, "-c", str(config)])  # int() refuses 4,301+
    assert huge.exit_code == 1 and huge.output.count("\n") == 1 and "has no tag '777" in huge.output
