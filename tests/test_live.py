"""Live KBs: start-up, schedule and file-change syncs through one SyncRunner."""

import shutil
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import chunk_table, eventually, write
from mcp import Client

from mcp_kb.app import App
from mcp_kb.live import LiveSync, SyncRunner
from mcp_kb.mcp.server import build_server
from helpers import MakeApp

pytestmark = pytest.mark.anyio


def _kb(folder: Path, **sync: object) -> dict[str, Any]:
    return {"name": "docs", "description": "d", "paths": [str(folder)], "sync": {"debounce": 0.2, **sync}}


async def _sources(client: Client, query: str) -> set[str]:
    result = await client.call_tool("search_docs", {"query": query, "mode": "keyword"})
    return {hit["source"] for hit in result.structured_content["results"]} if not result.is_error else set()


async def test_served_kb_follows_edits_creations_and_deletions(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "# A\n\nThe launch checklist lives here.\n")
    app = make_app(_kb(folder, watch=True, on_start=True))
    async with Client(build_server(app)) as client:

        async def indexed(query: str, source: str, present: bool = True) -> bool:
            return (source in await _sources(client, query)) == present

        await eventually(lambda: indexed("checklist", "a.md"))
        write(folder / "b.md", "# B\n\nQuarterly budget planning notes.\n")
        await eventually(lambda: indexed("budget", "b.md"))
        write(folder / "a.md", "# A\n\nThe rollback runbook lives here now.\n")
        await eventually(lambda: indexed("rollback", "a.md"))
        await eventually(lambda: indexed("checklist", "a.md", present=False))
        (folder / "b.md").unlink()
        await eventually(lambda: indexed("budget", "b.md", present=False))


async def test_save_by_rename_is_seen(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "# A\n\nOriginal wording.\n")
    app = make_app(_kb(folder, watch=True))
    app.sync()
    async with Client(build_server(app)) as client:

        def save_atomically() -> None:
            write(folder / "a.md.tmp", "# A\n\nRewritten by an editor that saves atomically.\n")
            (folder / "a.md.tmp").replace(folder / "a.md")

        # Saved again until seen: the watcher may not be up yet when the server starts.
        await _eventually_after(save_atomically, lambda: _has(client, "atomically", "a.md"))


async def _eventually_after(
    action: Callable[[], object], check: Callable[[], Awaitable[bool]], seconds: float = 20.0, every: float = 2.0
) -> None:
    """Do `action`, then poll `check`; repeat the action every `every` seconds until the deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        action()
        retry = time.monotonic() + every
        while time.monotonic() < min(retry, deadline):
            if await check():
                return
            await anyio.sleep(0.05)
    raise AssertionError("condition not met before the deadline")


async def _has(client: Client, query: str, source: str) -> bool:
    return source in await _sources(client, query)


async def test_a_burst_of_saves_gives_at_most_two_syncs(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "# A\n\nversion 0\n")
    debounce = 0.5
    app = make_app(_kb(folder, watch=True, debounce=debounce))
    app.sync()
    runner = SyncRunner(app)
    async with anyio.create_task_group() as group:
        group.start_soon(LiveSync(runner, app.config.kb).run)
        # The watcher is up once a save of ours has caused a sync.
        await _eventually_after(lambda: write(folder / "a.md", "# A\n\nprobe\n"), lambda: _synced_text(app, "probe"))
        before = runner.syncs_started
        for version in range(1, 51):
            write(folder / "a.md", f"# A\n\nversion {version} of the burst test\n")
            await anyio.sleep(0.005)
        await eventually(lambda: _synced_text(app, "version 50"))
        after_burst = runner.syncs_started
        # A late sync for the burst would be requested before the watcher sees this later save (written
        # once: the watcher is up, and a repeated save would itself ask for another sync).
        write(folder / "a.md", "# A\n\nsecond probe\n")
        await eventually(lambda: _synced_text(app, "second probe"))
        late = runner.syncs_started - after_burst - 1
        group.cancel_scope.cancel()
    assert 1 <= after_burst - before <= 2 and late <= 0


async def _synced_text(app: App, text: str) -> bool:
    rows = chunk_table(app.store, "docs").to_arrow().column("text").to_pylist()
    return any(text in row for row in rows)


async def test_schedule_syncs_again(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "# A\n\nfirst\n")
    app = make_app(_kb(folder, interval=0.3))
    runner = SyncRunner(app)
    async with anyio.create_task_group() as group:
        group.start_soon(LiveSync(runner, app.config.kb).run)
        await eventually(lambda: _at_least(runner, 2))
        group.cancel_scope.cancel()


async def _at_least(runner: SyncRunner, count: int) -> bool:
    return runner.syncs_started >= count


async def test_failed_sync_keeps_the_last_good_version_and_shows_in_status(make_app: MakeApp, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    write(folder / "a.md", "# A\n\nThe incident response plan.\n")
    app = make_app(_kb(folder, interval=0.3))
    app.sync()
    hidden = tmp_path / "moved-away"
    shutil.move(folder, hidden)  # the folder disappears (unmounted share, moved folder)
    async with Client(build_server(app)) as client:

        async def failed() -> bool:
            return app.status("docs")[0].last_outcome == "failed"

        await eventually(failed)
        assert "cannot read" in app.status("docs")[0].last_error
        assert await _sources(client, "incident") == {"a.md"}  # still answering from the last good version
        shutil.move(hidden, folder)

        async def recovered() -> bool:
            return app.status("docs")[0].last_outcome == "ok"

        await eventually(recovered)
        assert await _sources(client, "incident") == {"a.md"}


async def test_syncs_that_wait_for_a_running_one_hold_no_worker_thread(make_app: MakeApp, tmp_path: Path) -> None:
    """A flood of sync calls while one runs (a client retrying, a caller on purpose) queues as tasks: the threads
    searches run in stay free; a call that does not wait hears at once that a sync is running."""
    import threading

    from mcp_kb.api import SyncBusyError, SyncRequest

    write(tmp_path / "docs" / "a.md", "# A\n\nfirst\n")
    app = make_app(_kb(tmp_path / "docs"))
    app.sync()
    write(tmp_path / "docs" / "b.md", "# B\n\nsecond\n")  # something for the held sync to index
    runner, held, release = SyncRunner(app), threading.Event(), threading.Event()

    def hold(done: int, total: int, message: str) -> None:  # runs in the sync's worker thread, lock held
        held.set()
        release.wait(30)

    threads = anyio.to_thread.current_default_thread_limiter()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(runner.sync, SyncRequest(kb="docs"), hold)
            await eventually(lambda: _is_set(held))
            for _ in range(8):
                group.start_soon(runner.sync, SyncRequest(kb="docs"))
            await eventually(lambda: _at_least(runner, 9))
            assert threads.borrowed_tokens == 1  # the running sync's thread only
            with pytest.raises(SyncBusyError, match="already running"):
                await runner.sync(SyncRequest(kb="docs", wait=False))
            release.set()
    finally:
        release.set()
    assert app.status("docs")[0].files == 2 and threads.borrowed_tokens == 0


async def _is_set(event: threading.Event) -> bool:
    return event.is_set()
