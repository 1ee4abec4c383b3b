"""Freshness on every answer: a hit and a read say when their document was indexed, and say in one line (`stale`)
when its source changed since: a folder's file modified or deleted, a repository's ref moved past the indexed
commit, a web page older than its KB's schedule. A sync makes them current again; an earlier version read on purpose
and a server without the folder say nothing; a file system that hangs never holds an answer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from git_server import Repo
from helpers import until, write, text_of
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

import mcp_kb.ingest.folders
import mcp_kb.ingest.git.source
from mcp_kb.api import KBError, ReadRequest, SearchRequest
from mcp_kb.cli import main
from mcp_kb.app import App
from mcp_kb.ingest.sources import Indexed, Recorded, sources_of
from mcp_kb.passages import Hit
from mcp_kb.records import recorded_now
from mcp_kb.search import SearchResult
from helpers import MakeApp
from helpers import MakeConfig
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.anyio

LEAVE = "# Leave\n\nAnnual leave is 25 days a year, booked in the HR portal.\n"
TRAVEL = "# Travel\n\nTravel costs are refunded within 30 days of the trip.\n"


def _kb(folder: Path) -> dict[str, Any]:
    return {"name": "handbook", "description": "Company rules", "paths": [str(folder)]}


@pytest.fixture
def handbook(tmp_path: Path) -> Path:
    folder = tmp_path / "handbook"
    write(folder / "leave.md", LEAVE)
    write(folder / "travel.md", TRAVEL)
    return folder


def _hits(app: App, query: str, **request: Any) -> SearchResult:
    return app.search("handbook", SearchRequest(query=query, top_k=2, **request))


def _by_source(result: SearchResult) -> dict[str, Hit]:
    return {hit.source: hit for hit in result.hits}


def test_a_file_edited_after_its_sync_gives_a_stale_hit_saying_how_until_the_next_sync(
    make_app: MakeApp, handbook: Path
) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    fresh = _by_source(_hits(app, "annual leave days"))["leave.md"]
    assert not fresh.stale and fresh.changed == "" and fresh.indexed_at.endswith("Z")

    write(handbook / "leave.md", LEAVE.replace("25", "30"))
    result = _hits(app, "annual leave days")
    hits = _by_source(result)
    assert hits["leave.md"].stale and hits["leave.md"].changed.startswith("modified since it was indexed")
    assert not hits["travel.md"].stale  # only the file that changed
    assert any(note.startswith("stale results (1)") and "mcp-kb sync handbook" in note for note in result.notes)

    app.sync()
    synced = _by_source(_hits(app, "annual leave days"))["leave.md"]
    assert not synced.stale and "30 days" in synced.text and synced.indexed_at >= fresh.indexed_at


def test_a_deleted_file_is_a_stale_hit_and_read(make_app: MakeApp, handbook: Path) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    (handbook / "travel.md").unlink()
    hit = _by_source(_hits(app, "travel costs refunded"))["travel.md"]
    assert hit.changed == "deleted since it was indexed"
    answer = app.read("handbook", ReadRequest(kb="handbook", path="travel.md"))
    assert answer.stale and answer.changed == "deleted since it was indexed" and answer.indexed_at == hit.indexed_at


def test_a_read_says_when_its_document_was_indexed_and_whether_it_changed(make_app: MakeApp, handbook: Path) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    answer = app.read("handbook", ReadRequest(kb="handbook", path="leave.md"))
    assert answer.indexed_at and not answer.stale
    (handbook / "leave.md").write_text(LEAVE + "\nNew rule.\n", encoding="utf-8")
    answer = app.read("handbook", ReadRequest(kb="handbook", path="leave.md"))
    assert answer.stale and answer.model_dump(mode="json")["stale"] is True
    assert "New rule" not in answer.text  # the index's text, said to be out of date


def test_a_server_without_the_folder_says_nothing_rather_than_guess(
    make_app: MakeApp, handbook: Path, tmp_path: Path
) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    handbook.rename(tmp_path / "elsewhere")  # the folder is not on this machine (a reader of a shared index)
    hits = _hits(app, "annual leave days").hits
    assert hits and not any(hit.stale for hit in hits) and all(hit.indexed_at for hit in hits)


def test_an_earlier_version_read_on_purpose_is_not_called_stale(make_app: MakeApp, handbook: Path) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    write(handbook / "leave.md", LEAVE.replace("25", "30"))
    app.sync()
    write(handbook / "leave.md", LEAVE.replace("25", "35"))
    earlier = _by_source(_hits(app, "annual leave days", as_of="1"))["leave.md"]
    assert "25 days" in earlier.text and not earlier.stale and earlier.indexed_at
    assert _by_source(_hits(app, "annual leave days"))["leave.md"].stale  # the current version is


def test_a_file_system_that_hangs_never_holds_an_answer(
    make_app: MakeApp, handbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    released = threading.Event()
    real_stat = os.stat

    def hung_stat(path: str | Path, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).startswith(str(handbook)):
            released.wait(30)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", hung_stat)  # the os module ingest/folders.py stats with
    try:
        hits = _hits(app, "annual leave days").hits
        assert not released.is_set()  # answered while the stat still hung
        assert hits and not any(hit.stale for hit in hits)
    finally:
        released.set()


def _repository_kb(make_config: MakeConfig, embedder: FastEmbedder, tmp_path: Path, serving: bool) -> tuple[Repo, App]:
    repo = Repo(tmp_path / "lib")
    repo.write("README.md", "# Lib\n\nThe library parses invoices into ledger entries.\n")
    repo.commit()
    config = make_config(
        {"name": "handbook", "description": "code", "repos": [{"url": str(repo.folder), "ref": "main"}]}
    )
    return repo, App(config, embedder=embedder, serving=serving)


def test_a_servers_repository_hits_turn_stale_once_it_has_asked_where_the_ref_is(
    make_config: MakeConfig, embedder: FastEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, app = _repository_kb(make_config, embedder, tmp_path, serving=True)
    app.sync()
    assert not _hits(app, "parses invoices").hits[0].stale
    repo.write("README.md", "# Lib\n\nThe library parses invoices and receipts.\n")
    moved = repo.commit()
    monkeypatch.setattr(mcp_kb.ingest.git.source, "_TIP_SECONDS", 0.0)  # the minute between two looks, passed at once

    def stale_hit() -> Hit | None:
        hit = _hits(app, "parses invoices").hits[0]
        return hit if hit.stale else None

    hit = until(stale_hit, what="the moved ref to be seen")  # asked in the background: a later answer says it
    assert f"is at {moved[:12]} now" in hit.changed and hit.commit[:12] in hit.changed


def test_right_after_a_sync_a_repositorys_hits_are_not_called_stale_by_an_older_look(
    make_config: MakeConfig, embedder: FastEmbedder, tmp_path: Path
) -> None:
    repo, app = _repository_kb(make_config, embedder, tmp_path, serving=True)
    app.sync()
    _hits(app, "parses invoices")  # a look at the ref, in the background: the commit indexed
    repo.write("README.md", "# Lib\n\nThe library parses invoices and receipts.\n")
    repo.commit()
    app.sync()  # a push's sync: the index holds the new commit, the last look was before it
    hit = _hits(app, "parses invoices").hits[0]
    assert "receipts" in hit.text and not hit.stale, hit.changed


def test_a_command_asks_no_repository_and_tells_from_this_machines_last_fetch(
    make_config: MakeConfig, embedder: FastEmbedder, tmp_path: Path
) -> None:
    repo, app = _repository_kb(make_config, embedder, tmp_path, serving=False)
    app.sync()
    repo.write("README.md", "# Lib\n\nThe library parses invoices and receipts.\n")
    moved = repo.commit()
    asking = [thread for thread in threading.enumerate() if thread.name == "mcp-kb-ls-remote"]
    assert not _hits(app, "parses invoices").hits[0].stale  # nothing fetched since: nothing known
    assert [t for t in threading.enumerate() if t.name == "mcp-kb-ls-remote"] == asking  # and nothing asked
    (source,) = app.sources(app.config.kb[0])
    source.scan(known={}, revisions={})  # a fetch (a sync that failed after it): the index is behind what came
    hit = _hits(app, "parses invoices").hits[0]
    assert hit.stale and f"is at {moved[:12]} now" in hit.changed


@pytest.mark.parametrize(
    ("sync", "confirmed", "stale"),
    [
        ({"interval": 3600}, "2020-01-01T00:00:00Z", True),  # its site was last asked years ago
        ({"interval": 3600}, None, False),  # a sync (which asks every page again) ended just now
        ({"watch": True}, "2020-01-01T00:00:00Z", True),
        ({}, None, False),
    ],
)
def test_a_web_page_is_stale_once_its_site_was_last_asked_longer_ago_than_the_kb_asks_again(
    make_config: MakeConfig, tmp_path: Path, sync: dict[str, Any], confirmed: str | None, stale: bool
) -> None:
    config = make_config({"name": "site", "description": "a site", "urls": ["https://docs.example.com/"], "sync": sync})
    (web,) = sources_of(config.kb[0], tmp_path)
    page = "https://docs.example.com/guide"
    told = web.changed({page: Recorded(1, 1)}, Indexed({}, confirmed or recorded_now()))
    assert bool(told[page]) is stale and (not stale or told[page].startswith("its site was last asked"))


def test_a_file_touched_without_a_change_is_stale_until_a_sync_finds_its_bytes_the_same(
    make_app: MakeApp, handbook: Path
) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    os.utime(handbook / "leave.md", ns=(1, 1))  # a checkout, a copy: only a hash can tell
    assert _by_source(_hits(app, "annual leave days"))["leave.md"].stale
    app.sync()
    assert not _by_source(_hits(app, "annual leave days"))["leave.md"].stale
    assert not app.read("handbook", ReadRequest(kb="handbook", path="leave.md")).stale


def test_a_kb_path_naming_one_file_that_is_deleted_is_stale(make_app: MakeApp, handbook: Path) -> None:
    app = make_app({"name": "handbook", "description": "one file", "paths": [str(handbook / "leave.md")]})
    app.sync()
    (handbook / "leave.md").unlink()
    assert _by_source(_hits(app, "annual leave days"))["leave.md"].changed == "deleted since it was indexed"


def test_a_modification_time_no_calendar_holds_is_still_an_answer(
    make_app: MakeApp, handbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(handbook))
    app.sync()
    monkeypatch.setattr(mcp_kb.ingest.folders, "_fingerprint", lambda path: (1, 300_000_000_000 * 10**9))
    hit = _by_source(_hits(app, "annual leave days"))["leave.md"]
    assert hit.changed == "modified since it was indexed"


def test_a_process_whose_file_system_hangs_still_answers_and_exits(handbook: Path, tmp_path: Path) -> None:
    """A stat that never returns (a dead network mount) holds neither the answer nor the process's exit."""
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "handbook"\ndescription = "Company rules"\n'
        f'paths = ["{handbook}"]\n',
        encoding="utf-8",
    )
    assert CliRunner().invoke(main, ["sync", "-c", str(config)]).exit_code == 0
    script = f"""
import os, sys, threading
import mcp_kb.ingest.folders as folders
real = os.stat
def hung(path, *args, **kwargs):
    if str(path).startswith({str(handbook)!r}) and threading.current_thread().name == "mcp-kb-stat":
        threading.Event().wait()  # forever
    return real(path, *args, **kwargs)
folders.os.stat = hung
from mcp_kb.cli import main
main(["search", "handbook", "annual leave days", "-c", {str(config)!r}])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "leave.md" in done.stdout and "Stale" not in done.stdout, done.stderr


def test_the_cli_and_the_search_tool_say_stale_in_words_and_in_structure(
    make_app: MakeApp, handbook: Path, tmp_path: Path
) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "handbook"\ndescription = "Company rules"\n'
        f'paths = ["{handbook}"]\n',
        encoding="utf-8",
    )
    runner = CliRunner()
    assert runner.invoke(main, ["sync", "-c", str(config)]).exit_code == 0
    write(handbook / "leave.md", LEAVE.replace("25", "30"))
    shown = runner.invoke(main, ["search", "handbook", "annual leave days", "-c", str(config)])
    assert shown.exit_code == 0 and "Stale: modified since it was indexed" in shown.output
    read = runner.invoke(main, ["read", "handbook", "leave.md", "-c", str(config)])
    assert "indexed 20" in read.output and "Stale: modified since it was indexed" in read.output


async def test_the_search_and_read_tools_over_stdio_say_stale(handbook: Path, tmp_path: Path) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "handbook"\ndescription = "Company rules"\n'
        f'paths = ["{handbook}"]\n',
        encoding="utf-8",
    )
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
    )
    async with Client(server) as client:
        assert not (await client.call_tool("sync_knowledge_base", {})).is_error
        write(handbook / "leave.md", LEAVE.replace("25", "30"))
        result = await client.call_tool("search_handbook", {"query": "annual leave days", "top_k": 1})
        hit = result.structured_content["results"][0]
        assert hit["stale"] is True and hit["changed"].startswith("modified since") and hit["indexed_at"]
        assert "Stale: modified since it was indexed" in text_of(result.content[0])
        read = await client.call_tool("read_document", {"kb": "handbook", "path": "leave.md"})
        assert read.structured_content["stale"] is True and "Stale:" in text_of(read.content[0])


def test_answers_in_parallel_each_say_which_files_changed(make_app: MakeApp, handbook: Path) -> None:
    """Checks at once on a healthy disk each get their stats (only a mount in trouble says nothing)."""
    from mcp_kb.ingest.folders import files_changed

    for n in range(60):
        write(handbook / f"n{n}.md", f"# Note {n}\n\nText.\n")
    app = make_app(_kb(handbook))
    app.sync()
    recorded = {f"n{n}.md": Recorded(0, 0) for n in range(60)}  # as if each had changed since
    told: list[int] = []
    barrier = threading.Barrier(12)

    def check() -> None:
        barrier.wait()
        told.append(sum(1 for line in files_changed(app.config.kb[0], recorded).values() if line))

    threads = [threading.Thread(target=check) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert told == [60] * 12


def test_a_sync_that_could_not_read_a_source_does_not_vouch_for_its_documents(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """A web page whose site was down at the last syncs is as old as the last sync that reached it, however many
    failed since."""
    from fake_site import Site, serve_site

    site = Site()
    site.html("/guide/", "Guide", "<h1>Guide</h1><p>The guide explains how to install the tool with pip.</p>")
    with serve_site(site):
        app = make_app({"name": "site", "description": "a site", "urls": [{"url": f"{site.url}/guide/", "delay": 0}]})
        app.sync()
    confirmed = app.store.read_state("site").confirmed_at
    assert confirmed
    for _ in range(22):  # more than the recent syncs a state keeps
        try:
            app.sync()
        except KBError:
            pass
    assert app.store.read_state("site").confirmed_at == confirmed
