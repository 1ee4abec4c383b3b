"""What a sync would do, without syncing: files added, changed and deleted since the last sync, counted by listing and
stat alone (nothing hashed or parsed), in `status` (text and JSON), the admin page's figures and the search tool's
description of a KB behind its sources. Sources a listing cannot count (a web site) and a folder that is not here
say nothing rather than guess. (Time on 10,000 files: benchmarks/sync_speed.py noop.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import eventually, write
from mcp import Client

import mcp_kb.app
import mcp_kb.ingest.folders
import mcp_kb.sync
from mcp_kb.api import Pending, SyncRequest
from mcp_kb.cli import main
from mcp_kb.mcp.server import build_server
from mcp_kb.ui.views import live_status
from helpers import MakeApp

pytestmark = pytest.mark.anyio


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    for name in ("leave", "travel", "pay"):
        write(folder / f"{name}.md", f"# {name.title()}\n\nThe {name} policy of the company.\n")
    return folder


def _kb(folder: Path) -> dict[str, Any]:
    return {"name": "handbook", "description": "Company rules", "paths": [str(folder)]}


def _counts(pending: Pending | None) -> tuple[int, int, int]:
    assert pending is not None
    return pending.added, pending.changed, pending.deleted


def test_added_changed_and_deleted_files_are_counted_without_hashing_or_parsing(
    make_app: MakeApp, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(docs))
    app.sync()
    assert _counts(app.pending("handbook")) == (0, 0, 0)
    again = app.pending("handbook")
    assert again and not again.behind
    write(docs / "new" / "remote.md", "# Remote\n\nWorking from home.\n")
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    write(docs / "leave.md", "# Leave\n\n30 days.\n")
    (docs / "pay.md").unlink()
    hashed, parsed = [], []
    monkeypatch.setattr(mcp_kb.sync, "file_sha256", lambda path: hashed.append(path))
    monkeypatch.setattr(mcp_kb.ingest.folders, "binary_reason", lambda path, suffix: parsed.append(path))
    pending = app.pending("handbook")
    assert _counts(pending) == (2, 1, 1) and pending and pending.behind and pending.counted_at.endswith("Z")
    assert hashed == []  # listing and stat: a new or changed file is opened only to see it is text, as a scan does
    assert sorted(os.path.relpath(path, docs) for path in parsed) == ["bonus.md", "leave.md", "new/remote.md"]
    monkeypatch.undo()
    app.sync()
    assert _counts(app.pending("handbook")) == (0, 0, 0)


def test_a_file_touched_without_change_is_counted_as_changed_until_a_sync_finds_its_bytes_the_same(
    make_app: MakeApp, docs: Path
) -> None:
    app = make_app(_kb(docs))
    app.sync()
    os.utime(docs / "travel.md", ns=(1, 1))  # a checkout, a copy: only a hash can tell
    assert _counts(app.pending("handbook")) == (0, 1, 0)
    report = app.sync()[0]
    assert report.files_changed == 0 and _counts(app.pending("handbook")) == (0, 0, 0)


def test_a_count_is_kept_briefly_for_pollers_but_never_past_a_sync(make_app: MakeApp, docs: Path) -> None:
    app = make_app(_kb(docs))
    app.sync()
    first = app.pending("handbook", counted_within=3600)
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    assert app.pending("handbook", counted_within=3600) is first  # the admin page's polls: one count
    assert _counts(app.pending("handbook")) == (1, 0, 0)  # status: counted now
    app.sync(SyncRequest(kb="handbook"))
    assert _counts(app.pending("handbook", counted_within=3600)) == (0, 0, 0)  # a new version: counted again


def test_what_a_listing_cannot_count_is_not_counted(make_app: MakeApp, docs: Path, tmp_path: Path) -> None:
    site = make_app({"name": "site", "description": "a site", "urls": ["https://docs.example.com/"]})
    assert site.pending("site") is None  # never synced, and a site is asked by its crawl
    app = make_app(_kb(docs))
    assert app.pending("handbook") is None  # no sync yet: nothing to compare with
    app.sync()
    docs.rename(tmp_path / "elsewhere")  # a reader of a shared index, without the folder
    assert app.pending("handbook") is None
    assert app.status("handbook")[0].pending is None


def test_status_says_how_far_behind_in_text_and_json(docs: Path, tmp_path: Path) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "handbook"\ndescription = "Company rules"\n'
        f'paths = ["{docs}"]\n',
        encoding="utf-8",
    )
    runner = CliRunner()
    assert runner.invoke(main, ["sync", "-c", str(config)]).exit_code == 0
    assert "in step with its sources" in runner.invoke(main, ["status", "-c", str(config)]).output
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    (docs / "pay.md").unlink()
    shown = runner.invoke(main, ["status", "-c", str(config)]).output
    assert "behind its sources: 1 added, 0 changed, 1 deleted since the last sync; run `" in shown
    assert "mcp-kb sync handbook" in shown
    [status] = json.loads(runner.invoke(main, ["status", "--json", "-c", str(config)]).output)
    assert {key: status["pending"][key] for key in ("added", "changed", "deleted")} == {
        "added": 1,
        "changed": 0,
        "deleted": 1,
    }
    assert status["pending"]["counted_at"]


def test_the_admin_page_shows_what_a_sync_would_do(make_app: MakeApp, docs: Path) -> None:
    app = make_app(_kb(docs))
    app.sync()
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    [polled] = live_status(app, ["handbook"])
    text = polled["pending_text"]
    assert isinstance(text, str) and text.startswith("1 added, 0 changed, 0 deleted since the last sync (counted ")


async def test_a_kb_behind_its_sources_says_so_in_its_search_tools_description(make_app: MakeApp, docs: Path) -> None:
    app = make_app(_kb(docs))
    app.sync()
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    async with Client(build_server(app)) as client:
        await eventually(
            lambda: _describes(client, "Behind its sources (1 added, 0 changed, 0 deleted"),
            what="the description to say the KB is behind",
        )
        await client.call_tool("sync_knowledge_base", {"kb": "handbook"})
        await eventually(
            lambda: _describes(client, "Behind", present=False), what="the description to drop the line after a sync"
        )


def test_a_file_a_sync_leaves_out_as_binary_is_not_counted_as_added(make_app: MakeApp, docs: Path) -> None:
    """A new or changed file is opened to see that it is text, as a sync's scan does: one it skips is no change."""
    app = make_app(_kb(docs))
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02binary" * 10)
    app.sync()
    assert _counts(app.pending("handbook")) == (0, 0, 0)


async def test_building_a_server_counts_nothing_before_its_first_answer(
    make_app: MakeApp, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(docs))
    counted = []
    monkeypatch.setattr(mcp_kb.sync, "count_pending", lambda *args: counted.append(args))
    monkeypatch.setattr(mcp_kb.app, "count_pending", lambda *args: counted.append(args))
    build_server(app)
    assert counted == []


async def test_a_description_saying_behind_clears_when_another_process_syncs(
    make_app: MakeApp, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_kb.mcp.server

    monkeypatch.setattr(mcp_kb.mcp.server, "_RECOUNT_SECONDS", 0.2)
    app = make_app(_kb(docs))
    app.sync()
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    async with Client(build_server(app)) as client:
        await eventually(lambda: _describes(client, "Behind its sources (1 added"), what="the KB to be behind")
        type(app)(app.config, embedder=app.embedder).sync()  # `mcp-kb sync` in a terminal, `mcp-kb watch`
        await eventually(lambda: _describes(client, "Behind", present=False), what="the description to clear")


async def _describes(client: Client, text: str, present: bool = True) -> bool:
    """Whether the search tool's description (as a client lists it now) holds `text`, or with `present` False,
    does not."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    return (text in (tools["search_handbook"].description or "")) is present


def test_a_poller_does_not_start_a_second_count_beside_a_running_one(
    make_app: MakeApp, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder on a slow mount: the admin page's polls give the last count while one runs, not a thread each."""
    import threading

    app = make_app(_kb(docs))
    app.sync()
    first = app.pending("handbook")
    write(docs / "bonus.md", "# Bonus\n\nOnce a year.\n")
    app.sync()  # a new version: the next poll counts again
    started, release, counts = threading.Event(), threading.Event(), []
    real = mcp_kb.sync.count_pending

    def slow(*args: Any) -> Pending | None:
        counts.append(args)
        started.set()
        release.wait(30)
        return real(*args)

    monkeypatch.setattr(mcp_kb.app, "count_pending", slow)
    counting = threading.Thread(target=app.pending, args=("handbook", 10.0))
    counting.start()
    assert started.wait(30)
    try:
        assert app.pending("handbook", counted_within=10.0) is first and len(counts) == 1
    finally:
        release.set()
        counting.join()
    assert _counts(app.pending("handbook", counted_within=10.0)) == (0, 0, 0) and len(counts) == 1
