"""A repository sync SIGKILLed while it writes: the index keeps answering, no commit vouches for the half-written
files, and the next sync compares whole trees and ends equal to a clean build of the new commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from git_server import Repo

from mcp_kb.api import SearchRequest
from mcp_kb.app import App
from helpers import MakeApp, chunk_table


def _config(tmp_path: Path, repo: Repo, storage: Path) -> str:
    path = tmp_path / f"{storage.name}.toml"
    path.write_text(
        f'storage = "{storage}"\n[[kb]]\nname = "code"\ndescription = "d"\n'
        f'[[kb.repos]]\nurl = "{repo.folder}"\nref = "main"\n',
        encoding="utf-8",
    )
    return str(path)


def _contents(app: App) -> list[tuple[str, str]]:
    rows = chunk_table(app.store, "code").to_arrow().select(["path", "text"]).to_pylist()
    return sorted((row["path"], row["text"]) for row in rows)


def test_a_sigkill_while_writing_leaves_the_last_synced_commit_whole(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "upstream")
    for i in range(400):
        repo.write(f"n{i:03d}.md", f"# Note {i}\n\nFirst text of note {i}.\n")
    synced = repo.commit()
    kb = {"name": "code", "description": "d", "repos": [{"url": str(repo.folder), "ref": "main"}]}
    app = make_app(kb)
    app.sync()
    for i in range(400):
        repo.write(f"n{i:03d}.md", f"# Note {i}\n\nSecond text of note {i}, after the edit.\n")
    newest = repo.commit()
    child = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", _config(tmp_path, repo, tmp_path / "index")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the sync has written a batch of changes, not all of them
        status = app.status("code")[0]
        if status.sync_running and status.progress.written and not status.commits:
            break
        assert child.poll() is None, child.stderr and child.stderr.read().decode()
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert 0 < sum("Second text" in text for _, text in _contents(app)) < 400
    assert app.status("code")[0].commits == {}  # no commit vouches for what the index now holds
    assert app.search("code", SearchRequest(query="text of note 7", mode="keyword")).hits
    report = app.sync()[0]
    assert report.crawl["trees compared"] == 1 and app.status("code")[0].commits == {"upstream": newest}
    assert newest != synced  # (the chain `== {...} != synced` compared a dict with a str: always true)
    clean = make_app(kb, storage=str(tmp_path / "clean"))
    clean.sync()
    assert _contents(app) == _contents(clean)
