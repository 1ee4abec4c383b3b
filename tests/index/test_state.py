"""Records beside an index (index/state.py): what lives where, and an index this process cannot write."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from helpers import write, text_of
from mcp_kb.api import SearchRequest
from helpers import MakeApp

_REMOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


@contextmanager
def read_only(folder: Path) -> Iterator[list[str]]:
    """A prefix that runs a command where `folder` cannot be written: as root (whom file modes do not
    stop) a read-only bind mount in a mount namespace of the command's own; otherwise the folder's
    write bits are taken away for the duration."""
    if os.geteuid() == 0:
        probe = (
            subprocess.run(
                ["unshare", "-m", "--", "sh", "-c", _REMOUNT, str(folder), "true"], capture_output=True, text=True
            )
            if shutil.which("unshare")
            else None
        )
        if probe is None or probe.returncode != 0:
            pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip() if probe else 'no unshare'}")
        yield ["unshare", "-m", "--", "sh", "-c", _REMOUNT, str(folder)]
        return
    paths = [folder, *folder.rglob("*")]
    modes = {path: path.stat().st_mode for path in paths}
    for path in paths:
        path.chmod(modes[path] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield []
    finally:
        for path in reversed(paths):
            path.chmod(modes[path])


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A KB synced into tmp_path/index by a writer; its kb.toml and the environment of another user's processes."""
    write(
        tmp_path / "docs" / "runbook.md",
        "# Runbook\n\n## Restart\n\nRestart the ingest worker when its queue backs up past a thousand messages.\n",
    )
    write(tmp_path / "docs" / "errors.md", "# Errors\n\nE5021 means the access token expired; sign in again.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Runbooks"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert _cli(["sync"], config, env).returncode == 0
    return config, env


def _cli(
    args: list[str], config: Path, env: dict[str, str], prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "mcp_kb", *args, "-c", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_status_and_search_work_on_an_index_they_cannot_write_and_sync_says_why_not(
    synced: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    config, env = synced
    with read_only(tmp_path / "index") as prefix:
        status = _cli(["status", "--json"], config, env, prefix)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)[0]["files"] == 2
        found = _cli(["search", "docs", "E5021 token expired"], config, env, prefix)  # the server test asks more
        assert found.returncode == 0 and "[1]" in found.stdout, found.stderr
        sync = _cli(["sync"], config, env, prefix)
        assert sync.returncode == 1 and "Traceback" not in sync.stderr
        assert sync.stderr.strip().splitlines() == [sync.stderr.strip()] and "not writable" in sync.stderr


@pytest.mark.anyio
async def test_a_read_only_server_answers_every_search_and_resource_from_a_read_only_folder(
    synced: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    config, env = synced
    with read_only(tmp_path / "index") as prefix:
        command = [*prefix, sys.executable, "-m", "mcp_kb", "serve", "--read-only", "-c", str(config)]
        async with Client(StdioServerParameters(command=command[0], args=command[1:], env=env)) as client:
            results = [
                await client.call_tool("search_docs", {"query": query})
                for query in ["ingest worker", "E5021", "access token", "queue backs up"] * 3
            ]
            status = json.loads(text_of((await client.read_resource("kb://docs/status")).contents[0]))
            metrics = json.loads(text_of((await client.read_resource("kb://docs/metrics")).contents[0]))
            tools = {tool.name: tool.description for tool in (await client.list_tools()).tools}
    assert [r.is_error for r in results] == [False] * 12, [text_of(r.content[0]) for r in results if r.is_error]
    assert status["files"] == 2 and metrics["search"]["searches"] == 12
    assert "2 documents" in (tools["search_docs"] or "")  # the summary is read from the index it cannot write beside


def test_readers_never_take_the_writer_lock_and_a_killed_syncs_record_is_not_a_running_sync(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search or status that took the lock even for an instant would make a sync starting then wait
    (or fail with --no-wait); they read the holder's record and ask the OS whether it lives."""
    import filelock

    from mcp_kb.errors import SearchError
    from mcp_kb.index.state import _holder_path, sync_lock

    write(tmp_path / "docs" / "a.md", "# A\n\nalpha\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    with sync_lock(app.store, ["docs"]):

        def taken(*args: object, **kwargs: object) -> None:
            raise AssertionError("a reader took the writer lock")

        monkeypatch.setattr(filelock.FileLock, "acquire", taken)
        assert app.status("docs")[0].sync_running
        assert (
            app.search("docs", SearchRequest(query="alpha")).hits == []
            and "indexing in progress" in app.search("docs", SearchRequest(query="alpha")).notes[0]
        )
        monkeypatch.undo()
    assert not app.status("docs")[0].sync_running
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = {"pid": int(dead.stdout), "host": os.uname().nodename, "kbs": ["docs"]}
    _holder_path(app.store.uri).write_text(json.dumps(record), encoding="utf-8")  # as a SIGKILLed sync leaves it
    assert not app.status("docs")[0].sync_running
    with pytest.raises(SearchError, match="has not been synced yet"):
        app.search("docs", SearchRequest(query="alpha"))
